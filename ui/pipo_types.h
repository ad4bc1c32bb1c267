// PIPO in the desktop app (docs/design/pipo.md, issue 16): the value types that cross the GUI,
// engine and storage threads, the label every PIPO reply carries, and helpers the settings, the
// chat and the live panel share. PIPO is APPROXIMATE (the second token of a step is not verified
// by the target): it is never a default, and every PIPO reply and view says so.
#pragma once

#include <QMetaType>
#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat::ui {

// The label of every PIPO reply, status line and view (the CLI's words).
inline constexpr const char* kPipoLabel = "approximate: not verified by the target";
// MessageStats::mode and GenerationRecord::mode of a PIPO reply.
inline constexpr const char* kPipoMode = "pipo";

// Settings › PIPO: the user's choice, copied into every job (GenerationSettings::pipo).
struct PipoChoice {
  bool enabled = false;  // off by default: PIPO is approximate, never a default
  // The release folder (holding pipo.json) or the manifest itself; empty = the bundled release
  // (<bundled models>/pipo) when it exists (pipo_release_folder).
  QString release;
  // Keep token 2 when the confidence head says >= this, in [0, 1]; < 0 = the release's
  // recommended_threshold (PipoReleaseInfo).
  float threshold = -1.0f;
  // The user-facing context limit in raw tokens; 0 = the plain target's context. The latent
  // limit (pairs the backbone's KV cache holds) is derived: min(backbone context, raw limit).
  int raw_context = 0;
  // The fidelity gauge: every this many steps, the KL of token 1 against the plain target (a
  // second copy of the target loaded for it); 0 = off (the default).
  int fidelity_every = 0;
  // pair_size and extra_draft_tokens are fixed by the design (2 and 1): shown, not stored.
  bool operator==(const PipoChoice& o) const {
    return enabled == o.enabled && release == o.release && threshold == o.threshold && raw_context == o.raw_context &&
           fidelity_every == o.fidelity_every;
  }
  bool operator!=(const PipoChoice& o) const { return !(*this == o); }
};

// What the engine has loaded of PIPO (EngineWorker::pipoStatusChanged), for the status line.
struct PipoStatus {
  bool enabled = false;          // the settings ask for PIPO
  bool loaded = false;           // the whole unit loaded (it is one unit or nothing)
  QString release;               // pipo.release of the unit
  QString folder;                // the release folder / manifest asked for
  QString backbone, mtp_head;    // part files loaded
  QString io;                    // the io part (compressor + confidence head) file loaded
  bool compressor = false;       // io part: compressor + PAD embedding
  bool confidence_head = false;  // io part: confidence head
  float threshold = 0;           // the threshold in force (the setting, or the release's)
  int raw_context = 0;           // raw tokens
  int latent_context = 0;        // pairs
  QString quality_json;          // the manifest's "quality" object ("{}" when absent)
  QString error;                 // why it did not load ("" when loaded or disabled)
};

// PIPO's figures of one reply, for the live panel and the stored generation record (docs/design/
// pipo.md, "Monitoring"). Times in ms.
struct PipoLive {
  QString release;
  long steps = 0, head_runs = 0, accepted = 0;  // decode steps, steps that ran token 2's heads, token 2s kept
  long raw_tokens = 0;                          // tokens emitted (an end-of-turn token included)
  int latent_length = 0;                        // pairs the backbone holds after the reply
  int raw_length = 0;                           // raw tokens those pairs stand for
  int prompt_pairs = 0, reused_pairs = 0;       // of the prompt: pairs, and pairs kept in the KV cache
  bool from_latents = false;                    // the prompt continued the stored latents
  double ttft_ms = 0, tpot_ms = 0;
  float threshold = 0;
  int raw_context = 0, latent_context = 0;
  // The fidelity gauge (PipoChoice::fidelity_every; 0 = off): this reply's samples of
  // KL(plain target ‖ PIPO) of token 1, in nats.
  int fidelity_every = 0, fidelity_samples = 0;
  double fidelity_mean_kl = 0, fidelity_max_kl = 0;
  double acceptance_rate() const { return head_runs ? static_cast<double>(accepted) / static_cast<double>(head_runs) : 0.0; }
  double tokens_per_step() const { return steps ? static_cast<double>(raw_tokens) / static_cast<double>(steps) : 0.0; }
  // Decode tokens/s after the first step: 1000 / tpot_ms (0 when unknown).
  double tokens_per_s() const { return tpot_ms > 0 ? 1000.0 / tpot_ms : 0.0; }
};

// The latent-format history the next PIPO turn continues (pipo_history.h's plan_pipo_turn): the
// pair sequence of the last reply on the request's path that has one, with its release, and
// whether a lossless reply came after it (or, with none, whether the path holds a lossless reply).
struct PipoHistory {
  bool found = false;
  std::vector<int32_t> pairs;  // [2 · n_pairs], PAD = kPairPad in second slots
  std::string release;
  bool later_lossless = false;
};

// One assistant message of a request's context, as the history lookup sees it (in path order):
// its storage id (> 0 stored, < 0 pending, 0 unsaved) and, for replies made in this session,
// the latents held in memory (has_latents), which win over the database.
struct PipoHistoryEntry {
  qint64 id = 0;
  bool has_latents = false;
  std::vector<int32_t> pairs;
  std::string release;
};

// Folds `entries` (path order) into the history: the last entry with latents (`lookup` gives
// those of an entry without in-memory latents: nullopt = none) and whether one without followed
// it. Never throws unless `lookup` does.
template <class Lookup>
PipoHistory resolve_pipo_history(const std::vector<PipoHistoryEntry>& entries, Lookup lookup) {
  PipoHistory h;
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (it->has_latents) {
      h.found = true;
      h.pairs = it->pairs;
      h.release = it->release;
      return h;
    }
    if (std::optional<MessageLatents> l = lookup(*it)) {
      h.found = true;
      h.pairs = std::move(l->pairs);
      h.release = std::move(l->release);
      return h;
    }
    h.later_lossless = true;  // a reply without latents after the one that has them (if any)
  }
  return h;
}

// The release folder a choice names: choice.release, else the bundled <models>/pipo when it
// holds a pipo.json, else "" (none).
QString pipo_release_folder(const PipoChoice& c);
// The bundled release folder (<bundled_models_dir()>/pipo) when it holds a pipo.json, else "".
QString bundled_pipo_release();

// What the Settings dialog shows of a release before it is loaded: read from pipo.json and the
// backbone's GGUF header only (no hashes, no weights). `ok` false with `error` when the folder
// has no readable manifest.
struct PipoManifestSummary {
  bool ok = false;
  QString error;
  QString release;
  float recommended_threshold = 0.85f;
  int backbone_context = 0;  // the backbone's <arch>.context_length (pairs); 0 = unknown
};
PipoManifestSummary read_pipo_manifest(const QString& folder);

// "PIPO specchat-pipo-1 (approximate: not verified by the target): backbone ✓ · MTP head ✓ ·
// compressor + confidence head ✓ · threshold 0.85 · 1024 raw / 1024 pairs", or "PIPO not loaded:
// <error>"; "" when PIPO is off.
QString format_pipo_status(const PipoStatus& s);

// The stored summary of a PIPO reply: mode "pipo", acceptance_rate = token 2's acceptance rate,
// mean_accepted_length = tokens per step, n_drafted / n_accepted = head runs / token 2s kept,
// tokens_per_s = decode tokens/s after the first step.
MessageStats pipo_message_stats(const PipoLive& p, int n_tokens);

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::ui::PipoChoice)
Q_DECLARE_METATYPE(specchat::ui::PipoStatus)
Q_DECLARE_METATYPE(specchat::ui::PipoHistory)
Q_DECLARE_METATYPE(specchat::ui::PipoLive)
Q_DECLARE_METATYPE(std::vector<specchat::ui::PipoHistoryEntry>)
