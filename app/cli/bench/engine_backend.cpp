#include "app/cli/bench/engine_backend.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "app/cli/bench/machine_info.h"
#include "engine/drafters/install.h"
#include "engine/model.h"
#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_text.h"

namespace specchat::bench {

EngineBackend::EngineBackend(ModelPair& pair, int threads)
    : pair_(pair), engine_(*pair.target, pair.draft.get()), planner_(pair, threads) {
  // The block drafter and MTP head found beside the target, for the block/mtp families; none
  // found is fine (their configurations then decode plainly with the planner's warning).
  FeatureDrafterRequest req;
  req.block = req.mtp = true;
  req.optional = true;
  req.n_threads = threads;
  try {
    planner_.set_feature_drafters(install_feature_drafters(engine_, req));
  } catch (const std::exception& e) {  // a drafter file that cannot serve this target
    warnings.push_back(std::string("block drafter / MTP head not used: ") + e.what());
  }
}

std::vector<int32_t> EngineBackend::encode(const BenchPrompt& p, const std::string& prompt_format) {
  if (prompt_format == "raw") return pair_.encode_prompt(p.turns.front());
  std::vector<ChatMessage> msgs;
  for (const std::string& t : p.turns) msgs.push_back({"user", t});
  return pair_.encode_chat(msgs);
}

int EngineBackend::n_ctx() const { return pair_.target->n_ctx(); }
int EngineBackend::capacity() const { return engine_.capacity(); }

SpecConfig EngineBackend::plan(const BenchConfig& c, const std::vector<int32_t>& prompt) {
  if (c.baseline()) {
    SpecConfig s;
    s.draft_k = 0;
    return s;
  }
  const TreePlan p = planner_.plan_tree(c.settings, prompt);
  for (const std::string& w : p.warnings) {
    if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
  }
  return p.spec;
}

void EngineBackend::clear_cache() {
  engine_.clear_cache();
  wave_monitor_ms_ = 0;  // a new wave: no earlier request's gauge to wait for
}
int64_t EngineBackend::submit(const GenerateRequest& req, TokenCallback on_token) {
  return engine_.submit(req, std::move(on_token));
}
int64_t EngineBackend::submit_config(const BenchConfig& c, const BenchPrompt& p, const GenerateRequest& req,
                                     TokenCallback on_token) {
  if (!c.approximate()) return submit_prompt(p, req, std::move(on_token));
  if (!pipo_) throw std::runtime_error("configuration " + c.name + ": no PIPO release loaded (bench --pipo DIR)");
  PipoSession s(*pipo_);  // a fresh session: a cold start, as clear_cache gives the engine
  PipoGenerateOptions o;
  o.sampling = req.sampling;
  o.settings.acceptance_threshold = c.pipo_threshold;
  o.settings.raw_context = pipo_->backbone->n_ctx();
  const Vocab& v = pipo_->backbone->vocab();
  o.stop_ids.push_back(v.eos_id);
  if (v.eot_id >= 0) o.stop_ids.push_back(v.eot_id);
  // Through the Emitter, as the baseline's tokens: max_tokens, end of turn and stop strings
  // alike; token 2 of a step is the head's (the step's "draft").
  PipoFidelity fid{fidelity_plain_, 0, fidelity_every_};
  if (fidelity_plain_ && fidelity_every_ > 0) o.fidelity = &fid;
  GenerationResult res;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  std::optional<Clock::time_point> t_first;
  const TokenCallback forward = [&on_token, &t_first](const TokenEvent& e) {
    if (!t_first) t_first = Clock::now();
    if (on_token) on_token(e);
  };
  const PipoReply r = pipo_generate_text(s, pair_align_ids(req.prompt), o, req, forward, res);
  ApproxMonitor mon;
  mon.samples = fid.samples;
  mon.kl_sum = fid.kl_sum;
  mon.kl_max = fid.kl_max;
  const double own_ms = 1000.0 * r.monitor_s;
  // The gauge's time before the first token: the wall time to it less PIPO's own TTFT. PIPO
  // requests run one after another, so a request also waited for the gauge of the wave's
  // earlier ones (found by the helper: at concurrency 2 the second request's TTFT held it).
  double own_before_ms = 0;
  if (t_first && o.fidelity) {
    const double wall_ms = std::chrono::duration<double, std::milli>(*t_first - t0).count();
    own_before_ms = std::clamp(wall_ms - 1000.0 * r.ttft_s, 0.0, own_ms);
  }
  mon.before_first_ms = wave_monitor_ms_ + own_before_ms;
  mon.total_ms = wave_monitor_ms_ + own_ms;
  wave_monitor_ms_ += own_ms;
  GenerationStats& st = res.stats;
  st.n_prompt = static_cast<int>(req.prompt.size());
  st.n_generated = static_cast<int>(res.tokens.size());
  st.n_steps = static_cast<int>(r.counters.steps);
  st.n_target_tokens = static_cast<int>(r.counters.raw_tokens);
  st.n_drafted = static_cast<int>(r.counters.head_runs);
  // n_accepted stays the Emitter's: the head's tokens emitted (an end of turn the head proposed
  // ends the reply and is not one; found by the helper: accepted counted it).
  st.n_empty_drafts = static_cast<int>(r.counters.steps - r.counters.head_runs);
  st.ttft_ms = 1000.0 * r.ttft_s;
  st.decode_ms = 1000.0 * (r.total_s - r.ttft_s);
  const int64_t id = next_pipo_id_++;
  pipo_done_[id] = std::move(res);
  pipo_monitor_[id] = mon;
  return id;
}

ApproxMonitor EngineBackend::take_monitor(int64_t id) {
  const auto it = pipo_monitor_.find(id);
  if (it == pipo_monitor_.end()) return {};
  const ApproxMonitor m = it->second;
  pipo_monitor_.erase(it);
  return m;
}

void EngineBackend::step() {
  if (engine_.n_active() > 0) engine_.step();
}
bool EngineBackend::finished(int64_t id) const { return pipo_done_.count(id) ? true : engine_.finished(id); }
GenerationResult EngineBackend::take(int64_t id) {
  const auto it = pipo_done_.find(id);
  if (it == pipo_done_.end()) return engine_.take(id);
  GenerationResult r = std::move(it->second);
  pipo_done_.erase(it);
  return r;
}

void describe_machine_and_models(RunMeta& m, const ModelPair& pair, const std::string& backend) {
  m.date_utc = utc_now_iso();
  m.git_commit = git_commit(SPECCHAT_SOURCE_DIR);
  m.cpu_model = cpu_model_name();
  m.cpu_cores = cpu_cores();
  m.backend = backend;
  m.gpu = pair.target->backend_kind() == BackendKind::cuda ? pair.target->device_name() : "none (CPU backend)";
  m.target_model = pair.target->path();
  m.target_sha256 = file_sha256(m.target_model);
  if (pair.draft) {
    m.draft_model = pair.draft->path();
    m.draft_sha256 = file_sha256(m.draft_model);
  } else {
    m.draft_model = "none";
  }
}

}  // namespace specchat::bench
