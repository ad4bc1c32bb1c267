// Side-by-side compare: one prompt generated baseline (no drafter) then speculative on the
// engine thread (EngineWorker::compare), each side's text, TTFT, decode tokens/s and total time,
// the speedup (decode tokens/s ratio) with the total-time ratio beside it (RequestPlanner's
// definitions), and the verdict ("identical tokens" / "first difference at token N"; sampled runs
// say that differences are expected). Results stay until the next run; Save hands them to
// the window as a storage record. With PIPO on in the settings (GenerationSettings::pipo) the
// second side is PIPO instead (approximate, labelled so): the verdict is its divergence from
// the baseline (the first differing token), and the release's quality figures are shown.
#pragma once

#include <QWidget>

#include "ui/engine_types.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;

namespace specchat::ui {

class EngineWorker;

class CompareView : public QWidget {
  Q_OBJECT

 public:
  // `worker` lives on the engine thread and must outlive the view. Children have object
  // names: compareInput, compareRunButton, compareStopButton, compareSaveButton,
  // compareBaselineText, compareSpeculativeText, compareBaselineStats,
  // compareSpeculativeStats, compareSpeedup, compareTotalTimeRatio, compareVerdict,
  // compareStatus, compareSpeculativeHeader (names the second side's mode) and compareQuality
  // (a PIPO release's quality figures; hidden otherwise).
  explicit CompareView(EngineWorker* worker, QWidget* parent = nullptr);

  void setSettings(const GenerationSettings& s) { settings_ = s; }
  const GenerationSettings& settings() const { return settings_; }
  void setSystemPrompt(const QString& s) { system_prompt_ = s; }
  void setConversationId(qint64 id) { conversation_id_ = id; }
  void setPrompt(const QString& text);
  // Whether a chat reply is streaming on the same engine: a run started meanwhile waits behind
  // it, and the status says "Waiting for the current reply to finish…" until its first token.
  void setChatBusy(bool busy);

  bool isRunning() const { return running_ != 0; }
  bool hasResult() const { return has_result_; }
  const CompareResult& result() const { return result_; }

 public Q_SLOTS:
  // Starts a run of the prompt box's text (ignored while running or when blank).
  void run();
  // Cancels the running compare (Esc).
  void stop();

 Q_SIGNALS:
  void finished(const specchat::ui::CompareResult& result);
  // The Save button: the last finished result in storage form.
  void saveRequested(const specchat::CompareRecord& record);
  // Connected (queued) to EngineWorker::compare.
  void compareRequested(const specchat::ui::CompareJob& job);

 private:
  void onToken(quint64 job_id, int side, const QString& text, bool drafted);
  void onFinished(const specchat::ui::CompareResult& r);
  void setRunning(quint64 job_id);
  static QString waitingText();
  bool chat_busy_ = false;
  bool started_ = false;  // the running compare produced its first token

  EngineWorker* worker_;
  GenerationSettings settings_;
  QString system_prompt_;
  qint64 conversation_id_ = 0;
  quint64 next_id_ = 0;
  quint64 running_ = 0;
  bool has_result_ = false;
  CompareResult result_;
  QPlainTextEdit* input_;
  QPushButton* run_;
  QPushButton* stop_;
  QPushButton* save_;
  QPlainTextEdit* text_[2];
  QLabel* stats_[2];
  QLabel* speedup_;
  QLabel* total_ratio_;
  QLabel* verdict_;
  QLabel* status_;
  QLabel* header_;   // "Speculative" or "PIPO (approximate: …)"
  QLabel* quality_;  // a PIPO release's quality figures
  void showMode(bool pipo);  // the second side's header and the quality line
};

// "TTFT 12 ms · TPOT 3.1 ms · total 0.40 s · 48 tokens · token 2 kept 0.62 · 1.55 tokens/step"
// of a PIPO side (CompareResult::pipo_live).
QString format_compare_pipo_side(const CompareSide& s, const PipoLive& p);
// The release's quality object as one line ("key value · key value …"): numbers, booleans and
// short strings; an object keyed by thresholds (per_threshold) gives the entry nearest
// `threshold` (written key@0.85.sub), other objects key.sub; "" for an empty or unreadable object.
QString format_pipo_quality(const QString& quality_json, float threshold);

// "TTFT 120 ms · 35.2 tok/s · total 1.40 s · 48 tokens" (+ " · α 0.71 · τ 2.9" when drafted);
// tok/s is the decode speed (GenerationStats::tokens_per_s), total the side's total_ms.
QString format_compare_side(const CompareSide& s, bool speculative);
// "speedup (decode) 1.52×": CompareResult::speedup_decode.
QString format_speedup_decode(const CompareResult& r);
// "total-time ratio 1.31×": CompareResult::total_time_ratio.
QString format_total_time_ratio(const CompareResult& r);

}  // namespace specchat::ui
