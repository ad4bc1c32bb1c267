// Scheduler: the one thread that owns the runtime Engine (engine/runtime/engine.h) for the
// server. HTTP threads hand Jobs over through a bounded queue; the scheduler admits up to
// `parallel` of them as Engine sequences (continuous batching: every step verifies all active
// sequences in one batched target forward), streams each one's released text back to its Job,
// and finishes, cancels (client gone) or times out each one.
#pragma once

#include "app/serve/draft_policy.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/serve/api_request.h"
#include "app/serve/metrics.h"
#include "engine/drafters/install.h"
#include "engine/generator.h"
#include "engine/model_pair.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/spec_settings.h"

namespace specchat::serve {

using Clock = std::chrono::steady_clock;

// One request on its way through the scheduler. The HTTP thread fills the inputs, submits it
// and then waits on `cv` for text or the end; the scheduler writes the outputs under `m`.
struct Job {
  // inputs (set before submit, read-only afterwards)
  uint64_t id = 0;
  GenerateRequest req;          // prompt ids, max_tokens, sampling, stop strings; spec planned by the scheduler
  SpecSettings spec;            // the request's speculative settings (RequestPlanner::plan_tree)
  Clock::time_point arrived;    // when the HTTP request arrived
  Clock::time_point deadline;   // arrival + timeout (queue wait included)
  std::atomic<bool> cancel{false};  // set by the HTTP thread when the client went away
  // PIPO (decode_mode "pipo", APPROXIMATE): run by PipoService (pipo_service.h), not the Engine.
  bool pipo = false;
  float pipo_threshold = 0;     // acceptance_threshold in force, [0, 1]

  // outputs (under m)
  std::mutex m;
  std::condition_variable cv;
  std::string released;         // text released by the engine and not yet taken by the HTTP thread
  bool started = false;         // admitted into the engine
  bool done = false;
  bool timed_out = false;
  double ttft_ms = -1;          // arrival -> first released token (−1: none yet)
  GenerationResult result;      // valid when done without error
  std::optional<ApiError> error;  // set when done with an error
  std::vector<std::string> warnings;  // from planning (settings that could not be honoured)
  nlohmann::json pipo_report;   // PIPO: the response's "pipo" object (pipo_report_json), set with result

  // Takes the released text so far (under m).
  std::string take_released();
};

class Scheduler {
 public:
  // `pair` must outlive the scheduler; its models were loaded with n_seq ≥ parallel.
  // `threads`: PairOptions::n_threads (the calibration's timings are kept per count).
  // `share`: the KV sequences (at least `parallel`) and turn lock of the engine when the pair is
  // also used by another engine (the app's chat, EngineShare); default: the whole pool, alone.
  // std::invalid_argument when the engine's sequences are fewer than `parallel`.
  Scheduler(ModelPair& pair, int parallel, int queue, int threads, ServeMetrics& metrics,
            const EngineShare& share = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Runs one short request through the engine on the calling thread and forgets the caches
  // (start-up warm-up: every weight page touched, the pool woken). Call before start().
  GenerationResult warm_up(const GenerateRequest& req);
  // Starts the scheduler thread.
  void start();
  // Stops it: queued and active jobs end with a 503 error. Idempotent.
  void stop();

  // Queues a job. false when the queue already holds `queue` jobs (the caller answers 503).
  bool submit(const std::shared_ptr<Job>& job);

  // Whether the block drafter / MTP head is installed (found beside the target and bound to
  // it); safe from any thread.
  bool has_block_drafter() const { return has_block_.load(); }
  bool has_mtp_head() const { return has_mtp_.load(); }

  int active() const { return active_count_.load(); }
  int queued() const;
  int parallel() const { return parallel_; }

 private:
  struct Running;
  void loop();
  void admit(const std::shared_ptr<Job>& job);
  void finish(Running& r);
  void fail(const std::shared_ptr<Job>& job, ApiError e, const char* outcome);
  void update_gauges();

  ModelPair& pair_;
  int parallel_, queue_cap_, threads_;
  ServeMetrics& metrics_;
  EngineShare share_;
  // The block drafter / MTP head found beside the target (optional; none = requests for them
  // are planned as plain decoding with a warning).
  FeatureDrafters features_;
  std::atomic<bool> has_block_{false}, has_mtp_{false};  // features_, for other threads
  std::unique_ptr<class Engine> engine_;  // after features_: make_engine() sets it
  // A fresh engine over the pair with the feature drafters installed.
  std::unique_ptr<class Engine> make_engine();
  DraftLengthPolicy draft_policy_;  // draft length from the batch size (draft_policy.h)

  mutable std::mutex qm_;
  std::condition_variable qcv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  std::thread thread_;

  std::vector<std::unique_ptr<Running>> running_;  // scheduler thread only
  std::atomic<int> active_count_{0};
};

}  // namespace specchat::serve
