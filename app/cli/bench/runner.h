// The benchmark runner: every prompt of a suite under every configuration at every concurrency,
// interleaved per wave of prompts so machine noise hits all configurations alike, recording
// each request (records.h) and checking that every speculative output equals baseline's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "app/cli/bench/configs.h"
#include "app/cli/bench/records.h"
#include "app/cli/bench/suite.h"
#include "engine/generator.h"

namespace specchat::bench {

// What the runner drives: an Engine over a loaded pair (engine_backend.h), or a fake in tests.
// Same contract as specchat::Engine (engine/runtime/engine.h) for submit/step/finished/take.
// The fidelity gauge of one approximate (PIPO) request (engine/pipo/pipo_session.h,
// PipoFidelity): KL(plain target || PIPO) of token 1 in nats over `samples` steps, and the time
// the gauge's plain forwards took, which the runner takes out of the request's TTFT and latency.
struct ApproxMonitor {
  int samples = 0;
  double kl_sum = 0, kl_max = 0;  // nats
  double before_first_ms = 0;     // gauge time before the first token (in TTFT)
  double total_ms = 0;            // gauge time in the whole request (in its latency)
};

class BenchBackend {
 public:
  virtual ~BenchBackend() = default;
  // The request's prompt ids for a suite prompt (chat: the turns in the chat template; raw: the
  // text with BOS). Throws GenerationError("empty_prompt") when it encodes to nothing.
  virtual std::vector<int32_t> encode(const BenchPrompt& p, const std::string& prompt_format) = 0;
  virtual int n_ctx() const = 0;
  virtual int capacity() const = 0;  // most sequences at once
  // The engine's SpecConfig for a configuration and prompt (RequestPlanner::plan_tree for the
  // loaded pair: optimal trees, clamping); baseline gives draft_k 0.
  virtual SpecConfig plan(const BenchConfig& c, const std::vector<int32_t>& prompt) = 0;
  virtual void clear_cache() = 0;  // cold start for the next wave (no prefix reuse)
  virtual int64_t submit(const GenerateRequest& req, TokenCallback on_token) = 0;
  // The runner submits through this, with the suite prompt `req.prompt` was encoded from; a
  // backend that sends text (an HTTP endpoint) uses the prompt, the others just submit(req).
  virtual int64_t submit_prompt(const BenchPrompt& /*p*/, const GenerateRequest& req, TokenCallback on_token) {
    return submit(req, std::move(on_token));
  }
  // The runner submits through this: a backend that runs an approximate configuration (PIPO)
  // outside the engine does it here; the default is submit_prompt.
  virtual int64_t submit_config(const BenchConfig& /*c*/, const BenchPrompt& p, const GenerateRequest& req,
                                TokenCallback on_token) {
    return submit_prompt(p, req, std::move(on_token));
  }
  virtual void step() = 0;
  virtual bool finished(int64_t id) const = 0;
  virtual GenerationResult take(int64_t id) = 0;
  // What an approximate request's monitoring measured (PIPO's fidelity gauge), asked once after
  // take(id); the default (and a request without the gauge) has no samples and took no time.
  virtual ApproxMonitor take_monitor(int64_t /*id*/) { return {}; }
};

struct RunOptions {
  std::vector<int> concurrency = {1};
  std::vector<BenchConfig> configs;  // baseline first (parse_configs)
  int repeat = 1;
  int max_tokens = 64;               // per request, lowered per prompt to fit the context
  double max_time_s = 0;             // > 0: start no new wave after this much wall time
  const std::atomic<bool>* cancel = nullptr;  // stops between waves, like max_time
  // After each wave (every configuration has run its prompts and their identity with baseline
  // is checked): the run so far, for views that fill in while it runs. On the runner's thread.
  std::function<void(const BenchRun&)> on_wave;
};

// Progress after each request: done and total requests, and the wall seconds so far.
using ProgressFn = std::function<void(long done, long total, double elapsed_s)>;

// Runs the sweep: for each repeat, for each concurrency c, the prompts in suite order in waves
// of c; each wave runs every configuration in turn (the order rotates by one per wave) from a
// cold cache, all c requests queued at once and stepped together. Prompts that cannot fit
// (input + 1 token + the largest draft depth > n_ctx) are skipped with a note in `skipped`.
// max_tokens per prompt = min(opt.max_tokens, n_ctx - input - depth - 1), the same for every
// configuration. Greedy (T = 0) only: speculative outputs must equal baseline's token for token;
// a difference sets identical = false and first_diff (a failure, RequestRecord::failed, except
// for an approximate configuration, whose records say approximate and count it as divergence). A
// request that throws records its error. Throws std::invalid_argument for bad options
// (no configs, concurrency outside 1..capacity, repeat < 1).
BenchRun run_suite(BenchBackend& backend, const BenchSuite& suite, const RunOptions& opt, const ProgressFn& progress,
                   std::vector<std::string>* skipped = nullptr);

}  // namespace specchat::bench
