// Sums of many generation runs of one configuration, as the benchmarks report them (`specchat-cli
// bench`, specchat-gpu-bench's drafter table): τ, α and decode tokens/s over all runs, and how
// many runs gave the reference tokens.
#pragma once

#include <algorithm>
#include <vector>

#include "engine/generator.h"

namespace specchat {

struct RunTotals {
  long tokens = 0;      // tokens emitted
  long tau_tokens = 0;  // tokens the verification steps produced (a final EOS counts: τ's numerator)
  long steps = 0, drafted = 0, accepted = 0, runs = 0, identical = 0;
  double decode_ms = 0, draft_ms = 0, verify_ms = 0;

  // Adds one run; it is identical when its tokens equal `reference` (plain decoding's tokens).
  // Returns whether it was.
  bool add(const GenerationResult& r, const std::vector<int32_t>& reference) {
    tokens += r.stats.n_generated;
    tau_tokens += std::max(r.stats.n_target_tokens, r.stats.n_generated);
    steps += r.stats.n_steps;
    drafted += r.stats.n_drafted;
    accepted += r.stats.n_accepted;
    decode_ms += r.stats.decode_ms;
    draft_ms += r.stats.draft_ms;
    verify_ms += r.stats.verify_ms;
    ++runs;
    const bool same = r.tokens == reference;
    identical += same ? 1 : 0;
    return same;
  }
  double tau() const { return steps > 0 ? static_cast<double>(tau_tokens) / static_cast<double>(steps) : 0; }
  double alpha() const { return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0; }
  // Decode tokens/s (prefill excluded), 0 before any decoding time.
  double tokens_per_s() const { return decode_ms > 0 ? static_cast<double>(tokens) / (decode_ms / 1000.0) : 0; }
};

}  // namespace specchat
