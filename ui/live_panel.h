// The live panel: statistics of the reply being generated (or the last one), fed by
// EngineWorker::statsUpdated on the GUI thread. Shows tokens/s with a sparkline over the
// reply, acceptance rate α, mean accepted length τ with the accepted-length histogram,
// drafted/accepted counts, the draft / verify / sampling time split, memory (VRAM on a GPU,
// RSS on the CPU), KV cache size, and the active drafter, tree mode and budget. It keeps the
// last snapshot after the reply ends.
#pragma once

#include <QWidget>

#include "ui/engine_types.h"

class QLabel;

namespace specchat::ui {

class Histogram;
class Sparkline;
class SplitBar;

class LivePanel : public QWidget {
  Q_OBJECT

 public:
  // Children have object names for tests and style sheets: liveTokensPerS, liveSparkline,
  // liveAlpha, liveTau, liveHistogram, liveCounts, liveSplitBar, liveSplit, liveMemory,
  // liveKv, liveDrafter, liveTree, liveState; for PIPO replies (approximate) the livePipoBox
  // section: livePipoLabel ("approximate: not verified by the target"), livePipoRelease,
  // livePipoAcceptance (token 2's acceptance rate), livePipoTokensPerStep, livePipoLength
  // (latent length vs raw length), livePipoTiming (TTFT / TPOT), livePipoCache (pairs reused).
  explicit LivePanel(QWidget* parent = nullptr);

  const LiveStats& stats() const { return stats_; }
  int updateCount() const { return updates_; }  // snapshots shown so far

 public Q_SLOTS:
  // Shows one snapshot (any job: the newest one wins).
  void setStats(const specchat::ui::LiveStats& stats);
  // Back to the empty state ("no reply yet").
  void clear();

 private:
  LiveStats stats_;
  int updates_ = 0;
  QLabel* tps_;
  Sparkline* spark_;
  QLabel* alpha_;
  QLabel* tau_;
  Histogram* hist_;
  QLabel* counts_;
  SplitBar* split_bar_;
  QLabel* split_;
  QLabel* memory_;
  QLabel* kv_;
  QLabel* drafter_;
  QLabel* tree_;
  QLabel* state_;
  QWidget* pipo_box_;
  QLabel* pipo_label_;
  QLabel* pipo_release_;
  QLabel* pipo_acceptance_;
  QLabel* pipo_tps_;
  QLabel* pipo_length_;
  QLabel* pipo_timing_;
  QLabel* pipo_cache_;
  QLabel* pipo_fidelity_;
  void setPipo(const LiveStats& s);  // the PIPO section (shown for PIPO replies only)
};

// "1.2 GiB", "340.0 MiB", "12.0 KiB", "512 B".
QString format_bytes(size_t bytes);

}  // namespace specchat::ui
