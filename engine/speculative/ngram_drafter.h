// N-gram / prompt-lookup drafter (no model): proposes the tokens that followed earlier
// occurrences of the context's last n tokens (prompt lookup decoding, Saxena 2023; the
// "lookahead" n-gram pool idea of Fu et al. 2024), in any TreeBuilder shape.
#pragma once

#include "engine/speculative/drafter.h"

namespace specchat {

class NgramDrafter : public Drafter {
 public:
  // Matches suffixes of max_ngram down to min_ngram tokens; the longest n with a match wins.
  explicit NgramDrafter(int max_ngram = 3, int min_ngram = 1) : max_n_(max_ngram), min_n_(min_ngram) {}

  // The children of a tree slot (the context followed by the slot's path) are the tokens that
  // followed earlier occurrences of its longest matching suffix (max_ngram down to
  // min_ngram tokens; the suffix itself is not an occurrence), ranked by how often they
  // followed it (log of the share), ties to the most recent. Chains follow the top candidate;
  // dynamic trees grow best-first over this ranking (scoring is a scan of the context, no
  // forward), optimal trees take the shape's ranks. Children are deterministic
  // (q one-hot). Empty when nothing matches (B14).
  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                    const SamplingParams& params, Rng& rng) override;

 private:
  int max_n_, min_n_;
};

}  // namespace specchat
