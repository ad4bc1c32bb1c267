// PipoService: the server's PIPO release unit (docs/design/pipo.md). PIPO is APPROXIMATE: the
// second token of a step is kept on the confidence head's word, never verified by the target, so
// every response it makes carries "pipo": {"approximate": true, "label": kPipoLabel, ...} and a
// request gets it only by asking ("decode_mode": "pipo", api_request.h).
//
// Requests in PIPO mode run here, one at a time, on one PipoSession over the backbone's sequence
// 0, on a worker thread of their own: outside the batched Engine (the Scheduler never sees them).
// They are the Scheduler's Jobs (scheduler.h), so the HTTP side waits for and streams them the
// same way; Job::pipo_report holds the response's "pipo" object.
//
// The session keeps the pair sequence of the last reply. A request whose prompt's raw ids start
// with all of that sequence's raw ids (the same conversation, a turn later) continues from those
// latents (continue_pairs, pipo_history.h: re-pairing a reply's raw ids would feed the backbone
// other latents than it produced); any other prompt is pair-aligned afresh, its whole-pair prefix
// shared with the cache still reused. The report says which ("continued_from_latents").
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "app/serve/metrics.h"
#include "app/serve/scheduler.h"
#include "engine/pipo/pipo_release.h"

namespace specchat::serve {

// The label of every PIPO reply (the CLI's too).
inline constexpr const char* kPipoLabel = "approximate: not verified by the target";

// Loads the release unit at `path` (a folder holding pipo.json, or the manifest) to serve next to
// the target `target_path` whose vocabulary is `target_vocab`: PipoLoadOptions::plain_target =
// target_path, so a release made from another target is refused (PipoError target_mismatch);
// the backbone on `backend` with `threads` CPU threads and one sequence whose KV cache (rows of
// `kv_type`, f16 or f32) holds min(backbone n_ctx_train, raw_context) pairs (`raw_context`: the
// served context in raw tokens).
// Throws PipoError (the release refused, with the reason; also target_mismatch when the
// backbone's vocabulary is not the target's, which encodes the prompts), ModelError, GgufError.
PipoUnit load_serve_pipo_unit(const std::string& path, const std::string& target_path, const Vocab& target_vocab,
                              int raw_context, int threads, BackendKind backend, DType kv_type = DType::f16);

// The file of part `slot` ("backbone", "mtp", "io") as the loaded release's manifest names it,
// resolved against the manifest's folder; "" when the manifest cannot be read again.
std::string pipo_part_file(const PipoReleaseInfo& info, const std::string& slot);

class PipoService {
 public:
  // `unit`: loaded (load_serve_pipo_unit). `threshold`: the default acceptance_threshold, in
  // [0, 1]; < 0 = the release's recommended_threshold. `raw_context`: the user-facing context in
  // raw tokens (the served target's n_ctx; > 0). `queue`: jobs that may wait beyond the one
  // running (submit refuses past it). Throws PipoError(bad_setting) for a threshold above 1 or
  // not finite, std::invalid_argument for raw_context < 1 or queue < 0.
  // `plain` (optional): a copy of the plain target for the fidelity gauge, sampled on 1 step in
  // `fidelity_every` (> 0 with plain).
  PipoService(PipoUnit unit, double threshold, int raw_context, int queue, ServeMetrics& metrics,
              std::unique_ptr<LlamaModel> plain = nullptr, int fidelity_every = 0);
  ~PipoService();  // stop()
  PipoService(const PipoService&) = delete;
  PipoService& operator=(const PipoService&) = delete;

  // Starts the worker thread.
  void start();
  // Stops it: queued jobs and the running one end with 503 shutting_down. Idempotent.
  void stop();
  // Queues a job (its `pipo_threshold` already in [0, 1]). false when stopping or when `queue`
  // jobs already wait behind a running one (the caller answers 503).
  bool submit(const std::shared_ptr<Job>& job);

  // Runs one job to its end on the calling thread (the worker's body; tests): streams its text
  // into job.released (stop strings, max_tokens and end of turn as the Engine's Emitter applies
  // them), then sets result, pipo_report and done, or error (400 context_length_exceeded for a
  // prompt that does not fit with room for the reply, 500 engine_error) and done. A cancelled
  // job (client gone) ends "cancelled"; one past its deadline is marked timed_out. Counts
  // finished replies in the metrics (on_generation and on_pipo). Never throws.
  void run(Job& job);
  // Decodes up to 4 tokens after `prompt` untimed and uncounted, then forgets the session
  // (start-up warm-up: weight pages touched, scratch allocated). Call before start().
  void warm_up(const std::vector<int32_t>& prompt);

  const PipoReleaseInfo& info() const { return unit_.info; }
  const PipoUnit& unit() const { return unit_; }
  float default_threshold() const { return threshold_; }
  // The mode's settings with `threshold` and the service's raw context.
  PipoSettings settings(float threshold) const;
  int raw_limit() const;       // raw tokens a sequence may hold
  int latent_context() const;  // pairs it may hold
  // For /health and /v1/models: {"release", "approximate": true, "label", "acceptance_threshold"
  // (the default), "recommended_threshold", "pair_size": 2, "extra_draft_tokens": 1,
  // "raw_context", "latent_context"} (no file paths: /health needs no key).
  nlohmann::json describe() const;
  int queued() const;

 private:
  void loop();
  void finish_error(Job& job, ApiError e);
  void update_gauges();
  void idle();  // the unit is free again: busy_ cleared, gauges updated

  PipoUnit unit_;
  float threshold_ = 0.85f;
  int raw_context_ = 0, queue_cap_ = 0;
  ServeMetrics& metrics_;
  std::unique_ptr<PipoSession> session_;  // over unit_ (declared after it)
  // The pair sequence through the last reply as the client holds it (a stop string's cut tokens
  // left out): the next request continues it when its prompt extends it. Empty = none.
  std::vector<int32_t> history_;
  std::unique_ptr<LlamaModel> plain_;     // the fidelity gauge's target; null = off
  int fidelity_every_ = 0;

  mutable std::mutex qm_;
  std::condition_variable qcv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false, busy_ = false;
  std::atomic<bool> abort_{false};  // stop(): the running job ends with 503 shutting_down
  std::thread thread_;
};

// The response's "pipo" object for reply `r` of a request whose prompt was `prompt_tokens` raw
// ids (its pairs: r.prompt_pairs): {"mode": "pipo", "approximate": true, "label": kPipoLabel,
// "release", "settings": {"pair_size", "extra_draft_tokens", "acceptance_threshold",
// "raw_context", "latent_context"}, "steps", "head_runs", "token2_accepted",
// "token2_acceptance_rate" (of the steps that ran the head), "tokens_per_step", "latent_length"
// (pairs held at the end, prompt + reply), "raw_length" (raw tokens they stand for),
// "compression" (raw_length / latent_length), "prompt_pairs", "reused_pairs" (taken from the
// cache), "continued_from_latents", "stop_reason" (r's: stop|length|context|cancelled; run()
// writes how the reply really ended, a stop string or max_tokens included), "ttft_ms",
// "total_ms"}. `backbone_n_ctx`: the backbone's cache in pairs. Thresholds rounded to 6 decimals.
nlohmann::json pipo_report_json(const PipoReleaseInfo& info, const PipoSettings& st, const PipoReply& r,
                                int prompt_tokens, int backbone_n_ctx, bool from_latents);

// The short "pipo" object every chunk of a PIPO stream carries: {"approximate": true, "label"}.
nlohmann::json pipo_label_json();

}  // namespace specchat::serve
