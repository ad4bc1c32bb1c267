// N-gram / prompt-lookup drafter (no model): proposes the continuations that followed earlier
// occurrences of the context's last n tokens (prompt lookup decoding, Saxena 2023; the
// "lookahead" n-gram pool idea of Fu et al. 2024). Several matches become branches of a tree.
#pragma once

#include "engine/speculative/drafter.h"

namespace specchat {

class NgramDrafter : public Drafter {
 public:
  // Matches suffixes of max_ngram down to min_ngram tokens; the longest n with a match wins.
  explicit NgramDrafter(int max_ngram = 3, int min_ngram = 1) : max_n_(max_ngram), min_n_(min_ngram) {}

  // Chain mode: the continuation of the most recent match, up to node_budget tokens.
  // Tree modes: up to `branch` distinct continuations (most recent first), each up to `depth`
  // tokens, merged into a trie, at most node_budget nodes. Children are deterministic (q one-hot).
  // Empty when nothing matches (B14).
  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                    const SamplingParams& params, Rng& rng) override;

 private:
  int max_n_, min_n_;
};

}  // namespace specchat
