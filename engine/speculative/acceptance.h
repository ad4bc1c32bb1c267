// The acceptance rule of speculative decoding over a draft tree (a chain is a tree with one
// child per node). The emitted tokens follow the target's processed distribution p exactly.
//
// Greedy (T = 0): walk from the root; at each node take the target's argmax t; descend into the
// first child whose token is t; when none is, emit t and stop. At a leaf emit the argmax there
// (the bonus token). Result: the longest root-to-leaf path equal to the target argmax.
//
// Sampling (T > 0): recursive rejection sampling over siblings (SpecInfer, Miao et al. 2024
// §4.2; for a chain this is Leviathan et al. 2023 §2.3). At a node with target distribution p
// try its children in order; child x is accepted with probability min(1, p(x)/q(x)); on
// rejection p ← norm(max(0, p − q)). The variant follows how the children were drawn
// (DraftTree::child_mode): deterministic children have q one-hot at x (EAGLE), children drawn
// without replacement also get q ← norm(q without x) after a rejection (Sequoia §3.2). When all
// children are rejected, emit a sample of the current p and stop; after an accepted leaf, emit a
// sample of the leaf's p (bonus). p and q are the *processed* distributions (temperature,
// top-k, top-p applied to both), and q is what the tokens were really drawn from (B02).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative/draft_tree.h"

namespace specchat {

// The random choices the rule makes. Production uses RngChoices; the exactness tests enumerate
// every branch with weights instead of sampling.
class Choices {
 public:
  virtual ~Choices() = default;
  virtual bool bernoulli(double p) = 0;                 // true with probability p
  virtual int32_t draw(const Distribution& d) = 0;      // an id with probability d.probs[i]
};

class RngChoices : public Choices {
 public:
  explicit RngChoices(Rng& rng) : rng_(rng) {}
  bool bernoulli(double p) override { return rng_.uniform() < p; }
  int32_t draw(const Distribution& d) override { return d.sample(rng_); }

 private:
  Rng& rng_;
};

// min(1, p(x) / q(x)); when q(x) == 0 (x cannot have been drawn from q) returns 1 if p(x) > 0.
double accept_probability(const Distribution& p, const Distribution& q, int32_t x);

// norm(max(0, p − q)). When nothing is left (p ≤ q everywhere, only possible when p == q and
// then unreachable in exact arithmetic) returns p, so sampling stays total.
Distribution residual(const Distribution& p, const Distribution& q);

// d without id x, renormalised (d itself when x carries all of d's mass).
Distribution remove_token(const Distribution& d, int32_t x);

struct TreeOutcome {
  std::vector<int32_t> path;  // accepted node indices, root child first
  int32_t next_token = 0;     // correction (after a rejection) or bonus (after a leaf)
};

// tree: the draft; p: [n_nodes + 1] processed target distributions, p[0] after the committed
// context (the root), p[i + 1] after node i. `greedy` compares argmaxes and draws nothing.
TreeOutcome accept_tree(const DraftTree& tree, std::span<const Distribution> p, bool greedy,
                        Choices& choices);

}  // namespace specchat
