#include "app/serve/pipo_service.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_text.h"

namespace specchat::serve {

using nlohmann::json;

namespace {

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A threshold as the client gave it (0.3, not the float's 0.30000001192092896).
double shown(float threshold) { return std::round(static_cast<double>(threshold) * 1e6) / 1e6; }

}  // namespace

PipoUnit load_serve_pipo_unit(const std::string& path, const std::string& target_path, const Vocab& target_vocab,
                              int raw_context, int threads, BackendKind backend, DType kv_type) {
  PipoLoadOptions lo;
  lo.backbone.kv_type = kv_type;
  lo.plain_target = target_path;
  lo.backbone.n_threads = threads;
  lo.backbone.backend = backend;
  lo.backbone.n_seq = 1;
  PipoUnit u = load_pipo_release(path, lo);
  // The backbone's cache holds pairs: min(n_ctx_train, raw context) of them (a step that drops
  // token 2 spends a whole pair on one token). A shorter served context loads a smaller pool.
  PipoSettings st;
  st.raw_context = raw_context;
  const int latent = st.latent_context(u.backbone->config().n_ctx_train);
  if (latent < u.backbone->n_ctx()) {
    lo.backbone.n_ctx = latent;
    u = load_pipo_release(path, lo);
  }
  // The server encodes prompts with the target's tokenizer and template.
  if (u.backbone->vocab().hash() != target_vocab.hash()) {
    throw PipoError(PipoErrorKind::target_mismatch, "the backbone of release '" + u.info.release +
                                                        "' has another vocabulary than the served target " + target_path);
  }
  return u;
}

std::string pipo_part_file(const PipoReleaseInfo& info, const std::string& slot) {
  std::ifstream in(info.manifest_path);
  const json m = json::parse(in, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("parts") || !m["parts"].is_object() ||
      !m["parts"].contains(slot) || !m["parts"][slot].is_object() || !m["parts"][slot].contains("file") ||
      !m["parts"][slot]["file"].is_string()) {
    return "";
  }
  return (std::filesystem::path(info.manifest_path).parent_path() / m["parts"][slot]["file"].get<std::string>()).string();
}

PipoService::PipoService(PipoUnit unit, double threshold, int raw_context, int queue, ServeMetrics& metrics,
                         std::unique_ptr<LlamaModel> plain, int fidelity_every)
    : unit_(std::move(unit)), raw_context_(raw_context), queue_cap_(queue), metrics_(metrics), plain_(std::move(plain)),
      fidelity_every_(fidelity_every) {
  if (plain_ && fidelity_every_ < 1) throw std::invalid_argument("PipoService: fidelity_every must be at least 1");
  if (raw_context < 1) throw std::invalid_argument("PipoService: raw_context must be at least 1");
  if (queue < 0) throw std::invalid_argument("PipoService: queue must not be negative");
  threshold_ = threshold < 0 ? unit_.info.recommended_threshold : static_cast<float>(threshold);
  settings(threshold_).validate();
  session_ = std::make_unique<PipoSession>(unit_);
  metrics_.set_pipo_release(unit_.info.release);
}

PipoService::~PipoService() { stop(); }

PipoSettings PipoService::settings(float threshold) const {
  PipoSettings st;
  st.acceptance_threshold = threshold;
  st.raw_context = raw_context_;
  return st;
}

int PipoService::raw_limit() const { return settings(threshold_).raw_limit(unit_.backbone->n_ctx()); }
int PipoService::latent_context() const { return settings(threshold_).latent_context(unit_.backbone->n_ctx()); }

json PipoService::describe() const {
  return json{{"release", unit_.info.release},
              {"approximate", true},
              {"label", kPipoLabel},
              {"acceptance_threshold", shown(threshold_)},
              {"recommended_threshold", shown(unit_.info.recommended_threshold)},
              {"pair_size", 2},
              {"extra_draft_tokens", 1},
              {"raw_context", raw_limit()},
              {"latent_context", latent_context()}};
}

void PipoService::start() { thread_ = std::thread([this] { loop(); }); }

void PipoService::stop() {
  {
    std::lock_guard<std::mutex> l(qm_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  abort_ = true;
  qcv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> l(qm_);
    left.swap(queue_);
  }
  for (auto& j : left) finish_error(*j, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
}

bool PipoService::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> l(qm_);
    if (stopping_) return false;
    // An idle unit takes the job straight from the queue, so the queue holds only the excess.
    if (static_cast<int>(queue_.size()) >= queue_cap_ + (busy_ ? 0 : 1)) return false;
    queue_.push_back(job);
  }
  qcv_.notify_all();
  update_gauges();
  return true;
}

int PipoService::queued() const {
  std::lock_guard<std::mutex> l(qm_);
  return static_cast<int>(queue_.size());
}

void PipoService::update_gauges() {
  std::lock_guard<std::mutex> l(qm_);
  metrics_.set_pipo_load(busy_ ? 1 : 0, static_cast<int>(queue_.size()));
}

void PipoService::finish_error(Job& job, ApiError e) {
  {
    std::lock_guard<std::mutex> l(job.m);
    job.error = std::move(e);
    job.done = true;
  }
  job.cv.notify_all();
}

void PipoService::loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    std::vector<std::shared_ptr<Job>> dropped, expired;
    {
      std::unique_lock<std::mutex> l(qm_);
      qcv_.wait_for(l, std::chrono::milliseconds(100), [&] { return stopping_ || !queue_.empty(); });
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
      if (!queue_.empty()) {
        job = queue_.front();
        queue_.pop_front();
        busy_ = true;
      }
    }
    for (auto& j : dropped) finish_error(*j, ApiError{499, "the client went away", "invalid_request_error", "", "cancelled"});
    for (auto& j : expired) {
      {
        std::lock_guard<std::mutex> l(j->m);
        j->timed_out = true;
      }
      finish_error(*j, ApiError{503, "the request timed out waiting in the queue", "server_error", "", "timeout"});
    }
    update_gauges();
    if (!job) continue;
    run(*job);  // idle() before the job is answered
  }
}

void PipoService::idle() {
  {
    std::lock_guard<std::mutex> l(qm_);
    busy_ = false;
  }
  update_gauges();
}

void PipoService::run(Job& job) {
  const Vocab& v = unit_.backbone->vocab();
  GenerationResult res;
  Job* jp = &job;
  ServeMetrics* metrics = &metrics_;
  const TokenCallback on_event = [jp, metrics](const TokenEvent& e) {
    double ttft = -1;
    {
      std::lock_guard<std::mutex> l(jp->m);
      jp->released += e.text;
      if (jp->ttft_ms < 0) ttft = jp->ttft_ms = ms_since(jp->arrived);
    }
    if (ttft >= 0) metrics->observe_ttft_ms(ttft);
    jp->cv.notify_all();
  };
  // pipo_generate_text runs the reply through the Engine's Emitter: max_tokens, end of turn and
  // stop strings as plain decoding, only complete UTF-8 that cannot start a stop string
  // released; token 2 of a step counts as "drafted".
  PipoGenerateOptions g;
  g.sampling = job.req.sampling;
  g.settings = settings(job.pipo_threshold);
  g.stop_ids.push_back(v.eos_id);
  if (v.eot_id >= 0) g.stop_ids.push_back(v.eot_id);
  PipoFidelity fidelity;  // this reply's samples
  fidelity.plain = plain_.get();
  fidelity.every = fidelity_every_;
  g.fidelity = plain_ ? &fidelity : nullptr;
  bool timed_out = false;
  const auto keep_going = [&] {
    if (Clock::now() > job.deadline) timed_out = true;
    return !timed_out && !job.cancel.load() && !abort_.load();
  };
  {
    std::lock_guard<std::mutex> l(job.m);
    job.started = true;
  }
  std::vector<int32_t> pairs;
  bool from_latents = false;
  PipoReply rep;
  try {
    if (!history_.empty()) {
      if (auto c = continue_pairs(history_, job.req.prompt)) {
        pairs = std::move(*c);
        from_latents = true;
      }
    }
    if (!from_latents) pairs = pair_align_ids(job.req.prompt);
    history_.clear();  // until this reply is done
    rep = pipo_generate_text(*session_, pairs, g, job.req, on_event, res, keep_going);
    history_ = std::move(pairs);
    history_.insert(history_.end(), rep.new_pairs.begin(), rep.new_pairs.end());
  } catch (const std::length_error& e) {
    session_ = std::make_unique<PipoSession>(unit_);
    idle();
    return finish_error(job, ApiError{400, e.what(), "invalid_request_error", "", "context_length_exceeded"});
  } catch (const std::invalid_argument& e) {
    session_ = std::make_unique<PipoSession>(unit_);
    idle();
    return finish_error(job, ApiError{400, std::string("PIPO cannot decode this prompt: ") + e.what(),
                                      "invalid_request_error", "", "invalid_prompt"});
  } catch (const std::exception& e) {
    // The session's state is unknown after a failed step: the next request starts afresh.
    session_ = std::make_unique<PipoSession>(unit_);
    idle();
    return finish_error(job, ApiError{500, std::string("PIPO generation failed: ") + e.what(), "server_error", "",
                                      "engine_error"});
  }
  if (abort_.load()) {
    idle();
    return finish_error(job, ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"});
  }
  GenerationStats& st = res.stats;
  st.n_prompt = static_cast<int>(job.req.prompt.size());
  st.n_generated = static_cast<int>(res.tokens.size());
  st.n_drafted = st.n_accepted = 0;  // nothing was proposed to (or verified by) the target
  st.n_steps = static_cast<int>(rep.counters.steps);
  st.n_target_tokens = static_cast<int>(rep.counters.raw_tokens);
  st.prefill_ms = st.ttft_ms = 1000.0 * rep.ttft_s;
  st.decode_ms = 1000.0 * std::max(0.0, rep.total_s - rep.ttft_s);
  const PipoSettings used = settings(job.pipo_threshold);
  json report = pipo_report_json(unit_.info, used, rep, st.n_prompt, unit_.backbone->n_ctx(), from_latents);
  PipoTotals t;
  t.steps = rep.counters.steps;
  t.head_runs = rep.counters.head_runs;
  t.token2_accepted = rep.counters.accepted;
  t.raw_tokens = rep.counters.raw_tokens;
  t.latent_pairs = report["latent_length"].get<long>();
  t.raw_length = report["raw_length"].get<long>();
  t.completed = !timed_out && !job.cancel.load();
  t.fidelity_samples = fidelity.samples;
  t.fidelity_kl_sum = fidelity.kl_sum;
  t.fidelity_kl_max = fidelity.kl_max;
  if (plain_) {
    report["fidelity"] = {{"every", fidelity.every}, {"samples", fidelity.samples}, {"mean_kl", fidelity.mean_kl()},
                          {"max_kl", fidelity.kl_max}, {"monitor_ms", 1000.0 * rep.monitor_s}};
  }
  metrics_.on_generation(st);
  metrics_.on_pipo(t);
  // The gauges show the unit idle before the client hears back (a /metrics read right after a
  // reply sees it done).
  idle();
  {
    std::lock_guard<std::mutex> l(job.m);
    if (timed_out) job.timed_out = true;
    job.result = std::move(res);
    job.pipo_report = std::move(report);
    job.done = true;
  }
  job.cv.notify_all();
}

void PipoService::warm_up(const std::vector<int32_t>& prompt) {
  PipoGenerateOptions g;
  g.max_tokens = 4;
  g.settings = settings(threshold_ < 1.0f ? threshold_ : 0.0f);  // the heads run too
  (void)pipo_generate(*session_, pair_align_ids(prompt), g);
  session_ = std::make_unique<PipoSession>(unit_);
}

json pipo_report_json(const PipoReleaseInfo& info, const PipoSettings& st, const PipoReply& r, int prompt_tokens,
                      int backbone_n_ctx, bool from_latents) {
  const long latent_len = r.prompt_pairs + static_cast<long>(r.new_pairs.size() / 2);
  const long raw_len = prompt_tokens + static_cast<long>(r.raw.size());  // the kept reply (a stop string cuts)
  json j;
  j["mode"] = "pipo";
  j["approximate"] = true;
  j["label"] = kPipoLabel;
  j["release"] = info.release;
  j["settings"] = {{"pair_size", st.pair_size},
                   {"extra_draft_tokens", st.extra_draft_tokens},
                   {"acceptance_threshold", shown(st.acceptance_threshold)},
                   {"raw_context", st.raw_limit(backbone_n_ctx)},
                   {"latent_context", st.latent_context(backbone_n_ctx)}};
  j["steps"] = r.counters.steps;
  j["head_runs"] = r.counters.head_runs;
  j["token2_accepted"] = r.counters.accepted;
  j["token2_acceptance_rate"] = r.counters.acceptance_rate();
  j["tokens_per_step"] = r.counters.tokens_per_step();
  j["latent_length"] = latent_len;
  j["raw_length"] = raw_len;
  j["compression"] = latent_len > 0 ? static_cast<double>(raw_len) / static_cast<double>(latent_len) : 0.0;
  j["prompt_pairs"] = r.prompt_pairs;
  j["reused_pairs"] = r.reused_pairs;
  j["continued_from_latents"] = from_latents;
  j["stop_reason"] = r.stop_reason;
  j["ttft_ms"] = 1000.0 * r.ttft_s;
  j["total_ms"] = 1000.0 * r.total_s;
  return j;
}

json pipo_label_json() { return json{{"approximate", true}, {"label", kPipoLabel}}; }

}  // namespace specchat::serve
