// Value types that cross the GUI <-> engine thread boundary through queued signals
// (STYLE.md §8: plain copyable data, no pointers into either side's objects).
#pragma once

#include <QMetaType>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <vector>

#include "engine/chat_context.h"
#include "engine/chat_template.h"
#include "engine/generator.h"
#include "engine/runtime/spec_settings.h"
#include "engine/sampler.h"
#include "storage/conversation_store.h"
#include "ui/pipo_types.h"

namespace specchat::ui {

// Generation settings the user can change; copied into every job. The speculative fields are
// the app's shape of a SpecSettings (to_spec_settings) and take its defaults, the same as the
// CLI's (engine/runtime/spec_settings.h); their QSettings keys are in ui/settings.cpp.
struct GenerationSettings {
  SamplingParams sampling;  // temperature 0 = greedy (default); top_k, top_p, seed
  // false (default): every request at temperature > 0 draws a fresh seed (request_settings), so
  // Regenerate gives another reply; true: sampling.seed is used for every request.
  bool pin_seed = false;
  int max_tokens = 512;     // per reply (the bundled target holds 1,024 tokens; fit_context reserves at most half)
  int draft_k = SpecSettings{}.draft_k;  // drafted tokens per step (chain length); 0 = baseline (no drafter)
  DrafterKind drafter = DrafterKind::model;       // draft model (SpecSettings' default), or n-gram prompt lookup
  TreeMode tree_mode = SpecSettings{}.tree;       // chain, dynamic (EAGLE-2), optimal (Sequoia)
  // "Auto" (the CLI's --tree auto): shape, node budget and depth chosen per request from the
  // calibration and measured timings (RequestPlanner::plan_tree, Sequoia §3.3); tree_mode,
  // node_budget and tree_depth are then not used.
  bool auto_tree = false;
  int node_budget = SpecSettings{}.node_budget;   // tree modes: nodes per draft tree
  int tree_depth = SpecSettings{}.depth;          // tree modes: longest root-to-leaf path
  int tree_branch = SpecSettings{}.branch;        // dynamic trees: children expanded per node
  // Settings › PIPO (ui/pipo_types.h): off by default. When on, local replies are generated in
  // the approximate PIPO mode (labelled so) and Compare runs baseline vs PIPO.
  PipoChoice pipo;
};

// The settings one request runs with: `g` with, when g.pin_seed is false and the temperature is
// above 0, a fresh random sampling.seed (QRandomGenerator::system). The job carries that seed and
// it is stored with the reply (generations.params_json "seed"), so the reply can be reproduced
// by pinning it.
GenerationSettings request_settings(const GenerationSettings& g);

// Chat job ids and compare job ids share one worker; compare ids carry bit 62 (kCompareJobBit)
// so the two never collide and the live panel can tell a compare run's statistics apart.
inline constexpr quint64 kCompareJobBit = quint64{1} << 62;
inline bool is_compare_job(quint64 job_id) { return (job_id & kCompareJobBit) != 0; }

// The SpecSettings of `g`: drafter none when draft_k is 0, else the chosen drafter; the tree
// fields as they are.
SpecSettings to_spec_settings(const GenerationSettings& g);

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
  int tree_depth = 0;           // effective depth per step (chains: draft_k)
  QString device;               // "CPU" or the GPU's name
  // Decode speed after each emitted token ([n_generated] tok/s, n_generated / decode time so
  // far), for the sparkline; filled by the worker as the reply grows.
  std::vector<float> tps_history;
  QStringList warnings;         // settings not honoured (e.g. optimal tree without calibration)
  // A PIPO reply (approximate): `pipo_live` holds its figures; stats maps them as GenerationStats
  // (n_drafted / n_accepted = token-2 head runs / kept, n_steps = decode steps).
  bool pipo = false;
  PipoLive pipo_live;
};

// Where replies come from (Settings › Engine, issue 14 §7): the local engine (url empty), or an
// OpenAI-compatible server (specchat-cli serve, llama-server, vLLM, ...) at `url`
// (http(s)://host:port[/v1]) with an optional API key and model name.
struct RemoteEngine {
  QString url;    // empty = local
  QString key;    // "Authorization: Bearer"; empty = none
  QString model;  // the "model" field; empty = the server's default
  bool isRemote() const { return !url.trimmed().isEmpty(); }
};

// Settings › Server (issue 14 §1): an OpenAI-compatible server (the routes of `specchat-cli
// serve`) inside the app, serving from the chat's loaded models: the chat keeps KV sequence 0 and
// the server gets `parallel` more, and the two take turns step by step (EngineShare).
struct ServerSettings {
  bool enabled = false;
  QString host = QStringLiteral("127.0.0.1");  // loopback by default; any other address needs `key`
  int port = 8080;                             // 0 = any free port (ServerState::url names it)
  QString key;                                 // "Authorization: Bearer" key; empty = none (loopback only)
  int parallel = 2;                            // requests decoded at once (1–16)
  bool operator==(const ServerSettings& o) const {
    return enabled == o.enabled && host == o.host && port == o.port && key == o.key && parallel == o.parallel;
  }
  bool operator!=(const ServerSettings& o) const { return !(*this == o); }
};

// What the app's server is doing, after each change (EngineWorker::serverStateChanged).
struct ServerState {
  bool running = false;
  QString url;    // http://host:port/v1 while running
  QString error;  // why an enabled server is not running ("" when running or disabled)
  int parallel = 0;
  // Settings › PIPO on: the release the server answers "decode_mode": "pipo" with, or why it
  // cannot (both "" when PIPO is off).
  QString pipo_release;
  QString pipo_error;
};

// One reply to generate. `messages` is the whole conversation so far (system prompt first when
// there is one, then alternating user / assistant turns, ending with the new user turn): the
// engine is stateless between jobs apart from its KV prefix cache.
struct GenerateJob {
  quint64 id = 0;               // assigned by the sender, unique per worker; 0 = invalid
  qint64 conversation_id = 0;   // storage id, echoed back in the summary
  std::vector<ChatMessage> messages;
  // The same messages with the stored token ids of earlier replies (empty = unknown): when
  // given (same size as `messages`), the prompt splices those exact ids in and the KV prefix
  // of the previous turn is reused (engine/chat_context.h).
  std::vector<ContextMessage> context;
  GenerationSettings settings;
  // settings.pipo.enabled: the latents the reply continues (ChatController fills it from the
  // storage thread before sending the job).
  PipoHistory pipo_history;
};

// The conversation of `job` as RequestPlanner::fit_context and build_chat_context take it:
// job.context (the messages with their stored reply ids) when it matches job.messages, else the
// messages without ids.
std::vector<ContextMessage> job_context(const GenerateJob& job);

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
  // A PIPO reply (approximate, never silently plain): its figures, the pair sequence to store
  // (the prompt's pairs + the reply's, set_message_latents) and the note when the context was
  // re-prefilled instead of continuing stored latents ("" = continued or first turn).
  bool pipo = false;
  PipoLive pipo_live;
  std::vector<int32_t> pipo_pairs;
  QString pipo_note;
};

// Description of a loaded model pair, for the status line.
struct ModelInfo {
  QString target_path;
  QString draft_path;      // empty when no draft model
  QString template_name;
  int n_vocab = 0;
  int n_ctx = 0;           // KV cache length in tokens
  QStringList warnings;    // accepted vocabulary differences
  QString kv_type;         // the target's KV cache element type in use: "f16" | "f32"
  bool q8_activations = false;  // the target's quantized matrices round activations to 8 bits
};

// One compare run: `prompt` (a single user turn, after `system_prompt` when not empty) is
// generated twice on the engine thread, baseline (no drafter) then speculative with
// `settings`, each from a cold KV cache so both pay the same prefill.
struct CompareJob {
  quint64 id = 0;               // unique per worker, assigned by the sender
  qint64 conversation_id = 0;   // echoed back (0 = none)
  QString prompt;
  QString system_prompt;
  GenerationSettings settings;  // draft_k must be > 0 for a meaningful speculative side
  // true: the second side is PIPO (settings.pipo) instead of speculative decoding.
  bool pipo = false;
};

// One side of a compare run. Times in ms.
struct CompareSide {
  QString text;
  std::vector<int32_t> tokens;   // [n_generated]
  std::vector<uint8_t> drafted;  // [n_generated] 1 = accepted draft token
  GenerationStats stats;
  // Wall time of the side's generate call: request start -> last token (prefill included);
  // RequestPlanner's CompareRun::total_ms.
  double total_ms = 0;
  QString finish;
};

// Both sides and the verdict. `error` set (and sides possibly empty) when the run failed;
// `cancelled` when the user stopped it (the sides hold what was generated).
struct CompareResult {
  quint64 job_id = 0;
  qint64 conversation_id = 0;
  QString prompt;
  GenerationSettings settings;
  CompareSide baseline, speculative;
  QString drafter, tree_mode;  // of the speculative side
  int node_budget = 0;
  bool greedy = true;          // temperature 0: the two token streams must be identical
  bool identical = false;      // the token streams are equal
  int first_diff = -1;         // first differing position; -1 exactly when identical
  // RequestPlanner::compare's definitions (engine/runtime/request_planner.h): the speedup is
  // speculative decode tok/s over baseline decode tok/s; the total-time ratio is baseline
  // total_ms over speculative total_ms (prefill included), shown beside it. 0 when a side is empty.
  double speedup_decode = 0;
  double total_time_ratio = 0;
  bool cancelled = false;
  QString error;
  QStringList warnings;        // e.g. "no calibration: dynamic tree instead of optimal"
  // A baseline-vs-PIPO run (CompareJob::pipo): the second side is PIPO (approximate), its
  // figures, and the release's held-out quality figures (the manifest's "quality" object).
  bool pipo = false;
  PipoLive pipo_live;
  QString pipo_quality_json;
};

// Fills identical / first_diff / speedup_decode / total_time_ratio from the two sides
// (RequestPlanner::compare).
void finish_compare(CompareResult& r);
// "identical tokens", "first difference at token N", or for sampled runs
// "sampled: outputs may differ, both follow the target distribution".
QString compare_verdict(const CompareResult& r);
// The storage form (JSON parameters and sides; created_ms 0 = now).
CompareRecord to_compare_record(const CompareResult& r);

// How a reply was generated, for the generations table: mode "speculative"/"baseline",
// `settings` as JSON parameters, the engine statistics as JSON (times in ms) and the
// accepted-length histogram. message_id is left 0 (the storage worker sets it).
GenerationRecord to_generation_record(const GenerationSummary& s, const GenerationSettings& settings);

// The live panel's view of a stored generation record (the last reply of a conversation opened
// from the database): counts and times from stats_json, drafter and tree from params_json,
// finished = true. Fields the record lacks stay 0 / empty; never throws.
LiveStats live_stats_from_record(const GenerationRecord& rec);

// Rebuilding the draft visualization of a reloaded reply: its stored ids and drafted flags
// are decoded into per-token text on the engine thread (the vocabulary lives there).
struct PiecesRequest {
  qint64 message_id = 0;
  std::vector<int32_t> ids;      // [n] generated ids
  std::vector<uint8_t> drafted;  // [n] 1 = accepted draft token
  uint64_t tokenizer_hash = 0;   // must match the loaded target's vocabulary
};
// Steps follow from the flags: each verification step emits its accepted drafted tokens,
// then one target token. `ok` false when no models are loaded or the vocabulary differs.
struct DecodedPieces {
  qint64 message_id = 0;
  bool ok = false;
  QStringList texts;             // [n] newly complete UTF-8 per token (may be empty)
  std::vector<uint8_t> drafted;  // [n]
  std::vector<int> steps;        // [n]
};

// The context meter's question (issue 12, feature 4): how many tokens would `messages` (the
// system prompt first when there is one, the conversation, then the message being typed as the
// last user turn) take, and what would be left out? `n_history` counts the messages between the
// system prompt and the typed one.
struct ContextRequest {
  quint64 id = 0;                        // echoed back; the newest answer wins
  std::vector<ContextMessage> messages;
  bool has_system = false;               // messages.front() is the system prompt
  int max_tokens = 512;                  // reply reserve as RequestPlanner::fit_context keeps it
};

// The answer, in tokens of the loaded target's tokenizer. system + history + message is the
// whole prompt (chat template and BOS included: the template's share of each turn is counted
// with that turn; the generation prompt and BOS with the system part). `ok` false when no
// models are loaded.
struct ContextUsage {
  quint64 id = 0;
  bool ok = false;
  int n_ctx = 0;            // the KV cache length
  int reserve = 0;          // kept free for the reply (fit_context's reserve)
  int system_tokens = 0;
  int history_tokens = 0;
  int message_tokens = 0;
  int n_dropped = 0;        // oldest messages fit_context leaves out (whole exchanges)
  int prompt_tokens() const { return system_tokens + history_tokens + message_tokens; }
};

// Stats as stored with a message, from the engine's GenerationStats.
MessageStats to_message_stats(const GenerationStats& s, bool speculative);
// Stats of a finished reply: pipo_message_stats for a PIPO reply, else the above.
MessageStats to_message_stats(const GenerationSummary& s);

// "12.3 tok/s · α 0.41 · τ 2.10 · 64 tokens" (baseline: "12.3 tok/s · baseline · 64 tokens";
// PIPO: "approximate: not verified by the target · PIPO · 12.3 tok/s · token 2 kept 0.62 ·
// 1.62 tokens/step · 64 tokens").
QString format_stats(const MessageStats& s);

// Registers the types above for queued connections (idempotent; the worker calls it).
void register_engine_types();

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::ui::GenerateJob)
Q_DECLARE_METATYPE(specchat::ui::GenerationSummary)
Q_DECLARE_METATYPE(specchat::ui::ModelInfo)
Q_DECLARE_METATYPE(specchat::ui::LiveStats)
Q_DECLARE_METATYPE(specchat::ui::CompareJob)
Q_DECLARE_METATYPE(specchat::ui::CompareResult)
Q_DECLARE_METATYPE(specchat::ui::PiecesRequest)
Q_DECLARE_METATYPE(specchat::ui::DecodedPieces)
Q_DECLARE_METATYPE(specchat::MessageStats)
Q_DECLARE_METATYPE(specchat::ui::ContextRequest)
Q_DECLARE_METATYPE(specchat::ui::ContextUsage)
Q_DECLARE_METATYPE(specchat::ui::ServerSettings)
Q_DECLARE_METATYPE(specchat::ui::ServerState)
