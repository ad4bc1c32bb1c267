// Test helpers for tree building: budget(), and MarginalsSource, a NodeSource over fixed
// per-depth distributions (a block drafter's marginals, synthetic): a
// slot at depth d (the root: 0) gets q[d] as its children's distribution and ranking, whatever
// its own token; no children past q's last depth. It records the slots of every round.
#pragma once

#include <cmath>
#include <vector>

#include "engine/speculative/tree_builder.h"

namespace specchat::test {

// A TreeBudget of `mode` with node budget n, depth and branch.
inline TreeBudget budget(TreeMode mode, int n, int depth, int branch) {
  TreeBudget b;
  b.mode = mode;
  b.node_budget = n;
  b.depth = depth;
  b.branch = branch;
  return b;
}

class MarginalsSource final : public NodeSource {
 public:
  // free_scoring: as a block drafter's rows (dynamic trees grow best-first).
  explicit MarginalsSource(std::vector<Distribution> q, int room = INT_MAX, bool free_scoring = false)
      : q_(std::move(q)), room_(room), free_(free_scoring) {}

  void score(const DraftTree& t, std::span<const int32_t> slots) override {
    depth_.clear();
    for (int32_t s : slots) depth_.push_back(s == 0 ? 0 : t.nodes[static_cast<size_t>(s - 1)].depth);
    rounds.push_back(std::vector<int32_t>(slots.begin(), slots.end()));
    for (int32_t s : slots) scored += s != 0;  // the root is the context's row, not a tree node
  }
  void top(int r, int k, std::vector<Candidate>& out) override {
    out.clear();
    const int d = depth_.at(static_cast<size_t>(r));
    if (d >= static_cast<int>(q_.size())) return;
    const Distribution& q = q_[static_cast<size_t>(d)];
    for (size_t i = 0; i < q.ids.size() && static_cast<int>(out.size()) < k; ++i) {
      if (q.probs[i] > 0) out.push_back({std::log(q.probs[i]), q.ids[i]});
    }
  }
  bool distribution(int r, const SamplingParams&, Distribution& out) override {
    const int d = depth_.at(static_cast<size_t>(r));
    out = d < static_cast<int>(q_.size()) ? q_[static_cast<size_t>(d)] : Distribution{};
    return true;
  }
  // Tree nodes scored so far may not exceed the room given (a draft model's KV room).
  int room() const override { return room_ - scored; }
  bool free_scoring() const override { return free_; }

  std::vector<std::vector<int32_t>> rounds;  // the slots scored, per round
  int scored = 0;                            // tree nodes scored (slots other than the root)

 private:
  std::vector<Distribution> q_;
  int room_;
  bool free_;
  std::vector<int> depth_;
};

}  // namespace specchat::test
