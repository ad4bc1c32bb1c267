// Value types that cross the GUI <-> engine thread boundary through queued signals
// (STYLE.md §8: plain copyable data, no pointers into either side's objects).
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

#include "engine/chat_template.h"
#include "engine/generator.h"
#include "engine/sampler.h"
#include "storage/conversation_store.h"

namespace specchat::ui {

// Generation settings the user can change; copied into every job.
struct GenerationSettings {
  SamplingParams sampling;  // temperature 0 = greedy (default); top_k, top_p, seed
  int max_tokens = 256;     // per reply
  int draft_k = 4;          // drafted tokens per step (chain length); 0 = baseline (no drafter)
  DrafterKind drafter = DrafterKind::model;  // draft model, or n-gram prompt lookup
  TreeMode tree_mode = TreeMode::chain;      // chain, dynamic (EAGLE-2), optimal (Sequoia)
  int node_budget = 16;     // tree modes: nodes per draft tree
  int tree_depth = 4;       // tree modes: longest root-to-leaf path
  int tree_branch = 2;      // dynamic trees: children expanded per node
};

// A snapshot of a running generation for the live panel (sent at most every ~50 ms and after
// the last token). Times in ms, memory in bytes.
struct LiveStats {
  quint64 job_id = 0;
  GenerationStats stats;        // running totals (EngineWorker copies TokenEvent::stats)
  double elapsed_ms = 0;        // since the job started (prefill included)
  bool speculative = false;
  bool finished = false;        // true for the last snapshot of the job
  QString drafter;              // "draft model", "n-gram" or "none"
  QString tree_mode;            // tree_mode_name()
  int node_budget = 0;          // effective nodes per step (chains: draft_k)
  size_t rss_bytes = 0;         // process resident set size (CPU backend)
  size_t vram_used_bytes = 0, vram_total_bytes = 0;  // 0 on the CPU backend
  size_t kv_bytes = 0;          // KV caches of target and draft
};

// One reply to generate. `messages` is the whole conversation so far (system prompt first when
// there is one, then alternating user / assistant turns, ending with the new user turn): the
// engine is stateless between jobs apart from its KV prefix cache.
struct GenerateJob {
  quint64 id = 0;               // assigned by the sender, unique per worker; 0 = invalid
  qint64 conversation_id = 0;   // storage id, echoed back in the summary
  std::vector<ChatMessage> messages;
  GenerationSettings settings;
};

// What came out of one job. Always emitted once per job, also when it failed (finish "error",
// `error` set) or was cancelled before it started (finish "cancelled", no tokens).
struct GenerationSummary {
  quint64 job_id = 0;
  qint64 conversation_id = 0;
  QString text;                    // the whole reply (UTF-8 tail completed with U+FFFD)
  std::vector<int32_t> tokens;     // [n_generated] ids
  std::vector<uint8_t> drafted;    // [n_generated] 1 = accepted draft token
  QString finish;                  // finish_reason_name(): "length", "eos", "cancelled", ... or "error"
  QString error;                   // human-readable, when finish == "error"
  GenerationStats stats;           // engine statistics (ARCHITECTURE.md §6)
  bool speculative = false;        // a drafter was used (draft model loaded and draft_k > 0)
  uint64_t tokenizer_hash = 0;     // Vocab::hash() of the target, stored with the message
  QString template_name;           // chat template the prompt was rendered with
  int n_dropped_messages = 0;      // oldest turns left out so the prompt fits the context
};

// Description of a loaded model pair, for the status line.
struct ModelInfo {
  QString target_path;
  QString draft_path;      // empty when no draft model
  QString template_name;
  int n_vocab = 0;
  int n_ctx = 0;           // KV cache length in tokens
  QStringList warnings;    // accepted vocabulary differences
};

// Stats as stored with a message, from the engine's GenerationStats.
MessageStats to_message_stats(const GenerationStats& s, bool speculative);

// "12.3 tok/s · α 0.41 · τ 2.10 · 64 tokens" (baseline: "12.3 tok/s · baseline · 64 tokens").
QString format_stats(const MessageStats& s);

// Registers the types above for queued connections (idempotent; the worker calls it).
void register_engine_types();

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::ui::GenerateJob)
Q_DECLARE_METATYPE(specchat::ui::GenerationSummary)
Q_DECLARE_METATYPE(specchat::ui::ModelInfo)
Q_DECLARE_METATYPE(specchat::ui::LiveStats)
Q_DECLARE_METATYPE(specchat::MessageStats)
