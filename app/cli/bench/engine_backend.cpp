#include "app/cli/bench/engine_backend.h"

#include <algorithm>

#include "app/cli/bench/machine_info.h"
#include "engine/drafters/install.h"
#include "engine/model.h"

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

void EngineBackend::clear_cache() { engine_.clear_cache(); }
int64_t EngineBackend::submit(const GenerateRequest& req, TokenCallback on_token) {
  return engine_.submit(req, std::move(on_token));
}
void EngineBackend::step() { engine_.step(); }
bool EngineBackend::finished(int64_t id) const { return engine_.finished(id); }
GenerationResult EngineBackend::take(int64_t id) { return engine_.take(id); }

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
