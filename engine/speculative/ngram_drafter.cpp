#include "engine/speculative/ngram_drafter.h"

#include <algorithm>

namespace specchat {

DraftTree NgramDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                                const SamplingParams& /*params*/, Rng& /*rng*/) {
  DraftTree t;
  const int len = static_cast<int>(ctx.size());
  const int cap = std::min(max_nodes, budget.node_budget);
  const bool chain = budget.mode == TreeMode::chain;
  const int depth = chain ? cap : std::max(1, budget.depth);
  const int branches = chain ? 1 : std::max(1, budget.branch);
  if (cap <= 0 || len < 2) return t;
  for (int n = std::min(max_n_, len - 1); n >= min_n_ && t.empty(); --n) {
    const auto suffix = ctx.subspan(static_cast<size_t>(len - n));
    int found = 0;
    // Most recent occurrence first; the suffix itself (at len - n) is not a match.
    for (int j = len - n - 1; j >= 0 && found < branches && t.size() < cap; --j) {
      if (!std::equal(suffix.begin(), suffix.end(), ctx.begin() + j)) continue;
      const int start = j + n;
      const int m = std::min(depth, len - start);
      if (m <= 0) continue;
      ++found;
      // Insert ctx[start .. start + m) into the trie of continuations.
      int32_t parent = -1;
      for (int i = 0; i < m && t.size() < cap; ++i) {
        const int32_t tok = ctx[static_cast<size_t>(start + i)];
        int32_t existing = -1;
        for (int32_t c : t.children(parent + 1)) {
          if (t.nodes[static_cast<size_t>(c)].token == tok) existing = c;
        }
        // Earlier (more recent) matches rank first: they get higher scores.
        parent = existing >= 0 ? existing : t.add(tok, parent, -static_cast<double>(found));
      }
    }
  }
  return t;
}

}  // namespace specchat
