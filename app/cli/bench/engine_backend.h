// The runner's backend over a loaded model pair: one specchat::Engine stepping up to
// pair.target's n_seq sequences together (engine/runtime/engine.h), RequestPlanner for the
// configurations' SpecConfig.
#pragma once

#include <memory>

#include "app/cli/bench/runner.h"
#include <map>

#include "engine/model_pair.h"
#include "engine/pipo/pipo_session.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/request_planner.h"

namespace specchat::bench {

class EngineBackend : public BenchBackend {
 public:
  // `pair` must outlive the backend; `threads` as the pair was loaded with (the planner keeps
  // timings per thread count). Warnings of planning go to `warnings` (deduplicated).
  EngineBackend(ModelPair& pair, int threads);

  std::vector<int32_t> encode(const BenchPrompt& p, const std::string& prompt_format) override;
  int n_ctx() const override;
  int capacity() const override;
  SpecConfig plan(const BenchConfig& c, const std::vector<int32_t>& prompt) override;
  void clear_cache() override;
  int64_t submit(const GenerateRequest& req, TokenCallback on_token) override;
  // pipo configurations run on the PIPO unit (set_pipo), one request at a time, to its end
  // here (pipo_generate); the others go to the engine. Throws std::runtime_error for a pipo
  // configuration without a unit.
  int64_t submit_config(const BenchConfig& c, const BenchPrompt& p, const GenerateRequest& req,
                        TokenCallback on_token) override;
  // The PIPO release the pipo configurations run on (null = none; must outlive the backend).
  void set_pipo(PipoUnit* unit) { pipo_ = unit; }
  // The fidelity gauge for the pipo configurations (PipoFidelity): `plain` is a plain copy of
  // the target (its sequence 0; must outlive the backend), sampled on one step in `every`
  // (> 0); null = off. Its time is reported by take_monitor, apart from the request's: its own
  // and that of the earlier PIPO requests of the wave (since clear_cache), which it waited for.
  void set_pipo_fidelity(LlamaModel* plain, int every) {
    fidelity_plain_ = plain;
    fidelity_every_ = every;
  }
  void step() override;
  bool finished(int64_t id) const override;
  GenerationResult take(int64_t id) override;
  ApproxMonitor take_monitor(int64_t id) override;

  std::vector<std::string> warnings;

 private:
  ModelPair& pair_;
  Engine engine_;
  RequestPlanner planner_;
  PipoUnit* pipo_ = nullptr;
  int64_t next_pipo_id_ = int64_t{1} << 50;  // ids of PIPO requests (apart from the engine's)
  std::map<int64_t, GenerationResult> pipo_done_;
  std::map<int64_t, ApproxMonitor> pipo_monitor_;
  LlamaModel* fidelity_plain_ = nullptr;
  int fidelity_every_ = 0;
  double wave_monitor_ms_ = 0;  // gauge time of this wave's PIPO requests so far (clear_cache resets)
};

// Fills the report header's machine and model fields of `m` for a run on `pair`: date, SpecChat
// commit (of the source tree this was built from; "unknown" when installed), CPU model and
// cores, GPU (or "none (CPU backend)"), backend name, target and draft paths with their SHA-256.
void describe_machine_and_models(RunMeta& m, const ModelPair& pair, const std::string& backend);

}  // namespace specchat::bench
