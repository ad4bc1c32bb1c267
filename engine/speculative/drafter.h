// Drafters propose candidate continuations for the target to verify in one forward.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace specchat {

class LlamaModel;

// A chain of drafted tokens and, for each, the distribution it was drawn from (q).
// Empty is a legal outcome (FAULT-KINDS B14): the step is then a plain target decode.
struct DraftChain {
  std::vector<int32_t> tokens;   // [k]
  std::vector<Distribution> q;   // [k]
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Brings internal state in line with the committed context (e.g. prefills a draft model's
  // KV cache). Optional; propose() must work without it.
  virtual void sync(std::span<const int32_t> /*ctx*/) {}
  // Proposes up to k tokens following ctx ([n_ctx_tokens], the committed sequence). Draws with
  // the same processed sampling as the target (params), from rng.
  virtual DraftChain propose(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                             Rng& rng) = 0;
};

// A small llama model drafting autoregressively (Leviathan et al. 2023). Its KV cache keeps the
// longest prefix it shares with each new context, so accepted drafts are not recomputed.
class ModelDrafter : public Drafter {
 public:
  explicit ModelDrafter(LlamaModel& model) : m_(model) {}
  void sync(std::span<const int32_t> ctx) override;
  DraftChain propose(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                     Rng& rng) override;

 private:
  // Feeds ctx[common..n) so the cache holds all of ctx; returns logits of the last row.
  std::span<const float> feed_context(std::span<const int32_t> ctx);
  LlamaModel& m_;
};

}  // namespace specchat
