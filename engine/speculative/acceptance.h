// The acceptance rule of speculative decoding for a chain of drafted tokens.
//
// Greedy (T = 0): accept drafts while each equals the target's argmax; then emit the target's
// argmax at the first mismatch (or after the last draft: the bonus token).
// Sampling (T > 0), Leviathan et al. 2023 §2.3 / Chen et al. 2023 Alg. 2: draft x_i was drawn
// from q_i; accept it with probability min(1, p_i(x_i) / q_i(x_i)); on the first rejection
// emit a sample of norm(max(0, p_i − q_i)) and stop; when all are accepted emit a sample of
// p_k (bonus). p and q are the *processed* distributions (temperature, top-k, top-p applied
// to both), and q is the distribution the draft token was actually drawn from (one-hot for a
// deterministic drafter; FAULT-KINDS B02). The emitted tokens then follow p exactly.
#pragma once

#include <cstdint>
#include <span>

#include "engine/sampler.h"

namespace specchat {

// min(1, p(x) / q(x)); 1 when q(x) == 0 is impossible for a drawn x, so that case returns 0
// unless p(x) > 0 (defensive: a token q gives no mass cannot have been drawn from q).
double accept_probability(const Distribution& p, const Distribution& q, int32_t x);

// norm(max(0, p − q)). When p == q exactly (nothing left), returns p (any draw is then
// unreachable in exact arithmetic; returning p keeps the sampler total).
Distribution residual(const Distribution& p, const Distribution& q);

struct ChainOutcome {
  int n_accepted = 0;       // drafts accepted, 0..k
  int32_t next_token = 0;   // correction (after a rejection) or bonus (all accepted)
};

// draft: [k] tokens; q: [k] distributions each draft was drawn from; p: [k + 1] processed
// target distributions (p[i] predicts the token after draft i−1; p[0] after the context).
// `greedy` uses argmax comparisons and draws nothing from rng.
ChainOutcome accept_chain(std::span<const int32_t> draft, std::span<const Distribution> q,
                          std::span<const Distribution> p, bool greedy, Rng& rng);

}  // namespace specchat
