#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/model.h"
#include "engine/runtime/engine.h"

namespace specchat {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "eos";
    case FinishReason::stop: return "stop";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::context_full: return "context_full";
  }
  return "unknown";
}

const char* drafter_kind_name(DrafterKind k) {
  switch (k) {
    case DrafterKind::model: return "model";
    case DrafterKind::ngram: return "ngram";
    case DrafterKind::block: return "block";
    case DrafterKind::mtp: return "mtp";
  }
  return "model";
}

TreeBudget SpecConfig::effective_budget() const {
  TreeBudget b = tree;
  if (b.mode == TreeMode::chain) {
    b.node_budget = draft_k;
    b.depth = draft_k;
    b.branch = 1;
  }
  return b;
}

double GenerationStats::tokens_per_s() const {
  return decode_ms > 0 && n_generated > 0 ? n_generated / (decode_ms / 1000.0) : 0.0;
}
double GenerationStats::tpot_ms() const { return n_generated > 0 ? decode_ms / n_generated : 0.0; }
double GenerationStats::acceptance_rate() const {
  return n_drafted > 0 ? static_cast<double>(n_accepted) / n_drafted : 0.0;
}
double GenerationStats::mean_accepted_length() const {
  const int produced = std::max(n_target_tokens, n_generated);
  return n_steps > 0 ? static_cast<double>(produced) / n_steps : 0.0;
}

Generator::Generator(LlamaModel& target, LlamaModel* draft, const EngineShare* share)
    : engine_(std::make_unique<Engine>(target, draft, share ? *share : EngineShare{})) {}

Generator::~Generator() = default;


GenerationResult Generator::generate(const GenerateRequest& req, const TokenCallback& on_token,
                                     const std::atomic<bool>* cancel) {
  const Engine::SeqId id = engine_->submit(req, on_token, cancel);
  engine_->run_until_finished(id);
  return engine_->take(id);
}

LlamaModel& Generator::target() { return engine_->target(); }
LlamaModel* Generator::draft() { return engine_->draft(); }
void Generator::clear_cache() { engine_->clear_cache(); }

void Generator::warm_up(const GenerateRequest& req) {
  GenerateRequest w = req;
  // At least one token, so -n 0 warms the prefill and the kernels too (compare's baseline
  // would pay the cold start alone: its total_time_ratio read 2.7-17x for identical work).
  w.max_tokens = std::clamp(req.max_tokens, 1, 8);
  w.stop_strings.clear();
  if (!w.prompt.empty()) {
    try {
      generate(w);
    } catch (const GenerationError&) {
      // A request the real run refuses (or ends at once, e.g. a prompt at the context's end)
      // warms nothing; the real run reports it.
    }
  }
  clear_cache();
}

}  // namespace specchat
