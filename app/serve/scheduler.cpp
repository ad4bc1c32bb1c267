#include "app/serve/scheduler.h"

#include "engine/runtime/engine.h"
#include "engine/runtime/request_planner.h"

namespace specchat::serve {

std::string Job::take_released() {
  std::string out;
  out.swap(released);
  return out;
}

struct Scheduler::Running {
  std::shared_ptr<Job> job;
  Engine::SeqId seq = 0;
  long kv_tokens = 0;  // prompt + generated rows this sequence holds
};

namespace {
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
}  // namespace

Scheduler::Scheduler(ModelPair& pair, int parallel, int queue, int threads, ServeMetrics& metrics,
                     const EngineShare& share)
    : pair_(pair), parallel_(parallel), queue_cap_(queue), threads_(threads), metrics_(metrics), share_(share),
      engine_(make_engine()) {
  if (engine_->capacity() < parallel_) {
    throw std::invalid_argument("the models hold " + std::to_string(engine_->capacity()) + " sequences, fewer than parallel " +
                                std::to_string(parallel_));
  }
  metrics_.set_capacity(static_cast<long>(parallel_) * pair_.target->n_ctx());
}

Scheduler::~Scheduler() { stop(); }

std::unique_ptr<Engine> Scheduler::make_engine() {
  auto e = std::make_unique<Engine>(*pair_.target, pair_.draft.get(), share_);
  FeatureDrafterRequest req;
  req.block = req.mtp = true;
  req.optional = true;
  req.n_threads = threads_;
  try {
    features_ = install_feature_drafters(*e, req);
  } catch (const std::exception&) {
    // A drafter file beside the target that does not bind: serve without feature drafters.
    features_ = FeatureDrafters{};
    e = std::make_unique<Engine>(*pair_.target, pair_.draft.get(), share_);
  }
  has_block_ = features_.block_size > 0;
  has_mtp_ = features_.mtp;
  return e;
}

GenerationResult Scheduler::warm_up(const GenerateRequest& req) {
  const Engine::SeqId id = engine_->submit(req);
  engine_->run_until_finished(id);
  GenerationResult r = engine_->take(id);
  engine_->clear_cache();
  return r;
}

void Scheduler::start() { thread_ = std::thread([this] { loop(); }); }

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> l(qm_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  qcv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> l(qm_);
    if (stopping_) return false;
    // Free engine slots take jobs straight from the queue, so the queue holds only the excess.
    const int free_slots = parallel_ - active_count_.load();
    if (static_cast<int>(queue_.size()) >= queue_cap_ + std::max(0, free_slots)) return false;
    queue_.push_back(job);
  }
  qcv_.notify_all();
  return true;
}

int Scheduler::queued() const {
  std::lock_guard<std::mutex> l(qm_);
  return static_cast<int>(queue_.size());
}

void Scheduler::fail(const std::shared_ptr<Job>& job, ApiError e, const char* /*outcome*/) {
  {
    std::lock_guard<std::mutex> l(job->m);
    job->error = std::move(e);
    job->done = true;
  }
  job->cv.notify_all();
}

void Scheduler::admit(const std::shared_ptr<Job>& job) {
  try {
    RequestPlanner planner(pair_, threads_);
    planner.set_feature_drafters(features_);
    const TreePlan plan = planner.plan_tree(job->spec, job->req.prompt);
    job->req.spec = plan.spec;
    auto r = std::make_unique<Running>();
    r->job = job;
    r->kv_tokens = static_cast<long>(job->req.prompt.size());
    Running* rp = r.get();
    Job* jp = job.get();
    ServeMetrics* metrics = &metrics_;
    auto on_token = [rp, jp, metrics](const TokenEvent& e) {
      ++rp->kv_tokens;
      double ttft = -1;
      {
        std::lock_guard<std::mutex> l(jp->m);
        jp->released += e.text;
        if (jp->ttft_ms < 0) ttft = jp->ttft_ms = ms_since(jp->arrived);
      }
      if (ttft >= 0) metrics->observe_ttft_ms(ttft);
      jp->cv.notify_all();
    };
    r->seq = engine_->submit(job->req, on_token, &job->cancel);
    {
      std::lock_guard<std::mutex> l(job->m);
      job->started = true;
      job->warnings = plan.warnings;
    }
    running_.push_back(std::move(r));
    active_count_ = static_cast<int>(running_.size());
  } catch (const GenerationError& e) {
    ApiError err{400, e.what(), "invalid_request_error", "", e.kind()};
    if (e.kind() == "prompt_too_long") err.code = "context_length_exceeded";
    fail(job, err, "invalid");
  } catch (const std::exception& e) {
    fail(job, ApiError{500, std::string("the request could not start: ") + e.what(), "server_error", "", "engine_error"},
         "error");
  }
}

void Scheduler::finish(Running& r) {
  const std::shared_ptr<Job>& job = r.job;
  try {
    GenerationResult res = engine_->take(r.seq);
    metrics_.on_generation(res.stats);
    {
      std::lock_guard<std::mutex> l(job->m);
      job->result = std::move(res);
      job->done = true;
    }
    job->cv.notify_all();
  } catch (const std::exception& e) {
    fail(job, ApiError{500, std::string("generation failed: ") + e.what(), "server_error", "", "engine_error"}, "error");
  }
}

void Scheduler::update_gauges() {
  long kv = 0;
  for (const auto& r : running_) kv += r->kv_tokens;
  metrics_.set_load(static_cast<int>(running_.size()), queued(), kv);
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> admitted, dropped, expired;
    {
      std::unique_lock<std::mutex> l(qm_);
      if (running_.empty()) {
        qcv_.wait_for(l, std::chrono::milliseconds(100), [&] { return stopping_ || !queue_.empty(); });
      }
      if (stopping_) break;
      const auto now = Clock::now();
      for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->cancel.load()) {
          dropped.push_back(*it);
          it = queue_.erase(it);
        } else if (now > (*it)->deadline) {
          expired.push_back(*it);
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      while (static_cast<int>(running_.size() + admitted.size()) < parallel_ && !queue_.empty()) {
        admitted.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    for (auto& j : dropped) fail(j, ApiError{499, "the client went away", "invalid_request_error", "", "cancelled"}, "cancelled");
    for (auto& j : expired) {
      {
        std::lock_guard<std::mutex> l(j->m);
        j->timed_out = true;
      }
      fail(j, ApiError{503, "the request timed out waiting in the queue", "server_error", "", "timeout"}, "timeout");
    }
    // The draft cap of the batch these admissions form, set before their prefill: a request
    // admitted into a batch that will not draft skips the draft model's prefill (Engine::submit).
    // Without this a burst was admitted under the idle server's "no cap" and every request
    // prefilled the draft model for nothing. cap() is idempotent for the same count, so the
    // step below keeps this level.
    if (!admitted.empty()) {
      engine_->set_draft_cap(draft_policy_.cap(static_cast<int>(running_.size() + admitted.size())));
    }
    for (auto& j : admitted) admit(j);
    update_gauges();
    if (running_.empty()) continue;

    const auto now = Clock::now();
    for (auto& r : running_) {
      if (now > r->job->deadline && !r->job->cancel.load()) {
        {
          std::lock_guard<std::mutex> l(r->job->m);
          r->job->timed_out = true;
        }
        r->job->cancel = true;
      }
    }
    try {
      engine_->set_draft_cap(draft_policy_.cap(static_cast<int>(running_.size())));
      engine_->step();
    } catch (const std::exception& e) {
      // The engine's state is unknown after a failed step: every active request fails and a
      // fresh engine (same models, empty slots) takes over.
      for (auto& r : running_) {
        fail(r->job, ApiError{500, std::string("generation failed: ") + e.what(), "server_error", "", "engine_error"},
             "error");
      }
      running_.clear();
      active_count_ = 0;
      engine_.reset();
      engine_ = make_engine();
      continue;
    }
    // Finished requests leave the gauges before their clients hear back, so a client that
    // reads /metrics right after its reply sees itself gone (regression: test_serve_load saw
    // requests_processing 1 after every reply had arrived).
    std::vector<std::unique_ptr<Running>> done;
    for (size_t i = 0; i < running_.size();) {
      if (engine_->finished(running_[i]->seq)) {
        done.push_back(std::move(running_[i]));
        running_.erase(running_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
    active_count_ = static_cast<int>(running_.size());
    update_gauges();
    for (auto& r : done) finish(*r);
  }
  // Shutting down: everything still here ends with 503.
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> l(qm_);
    left.swap(queue_);
  }
  for (auto& j : left) fail(j, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"}, "error");
  for (auto& r : running_) fail(r->job, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"}, "error");
  running_.clear();
  active_count_ = 0;
}

}  // namespace specchat::serve
