// Static optimal draft trees (Sequoia, Chen et al. 2024, §3.1): a dynamic programme over a
// measured acceptance-by-rank vector that gives, for a node budget N and a depth D, the tree
// shape maximising the expected number of tokens one verification step emits.
//
// Model: a[r] (r = 0..R−1) is the probability that the draft's r-th ranked token (0 = most
// likely) is the token the target accepts at a position, independently of depth and of the
// path. A node's children are the ranks 0..k−1 of its parent's draft distribution (k ≤ R), so
// a node at the end of the rank path (r1, ..., rd) is on the accepted path with probability
// a[r1]·…·a[rd], and the expected number of emitted tokens is 1 (the correction/bonus token)
// plus the sum of those products over all nodes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specchat {

// A tree shape in the form TreeBudget::shape_parent / shape_rank take.
struct TreeShape {
  // [n_nodes] each: parent index (−1 = root, i.e. the last committed token; parent < i) and
  // rank of the node's token in its parent's draft distribution (0 = most likely).
  std::vector<int32_t> parent, rank;
  std::vector<int32_t> depth;   // [n_nodes] root children: 1
  double expected_tokens = 1.0;  // 1 + Σ_nodes Π a[rank] along the path (bonus token included)

  int size() const { return static_cast<int>(parent.size()); }
  int max_depth() const;
  // Nodes per depth level: [max_depth()], widths[d − 1] = nodes at depth d.
  std::vector<int> level_widths() const;
  bool is_chain() const;  // every node has rank 0 and a distinct depth (or the shape is empty)
};

// Solves the Sequoia DP once for every budget n ≤ max_nodes and depth d ≤ max_depth, in
// O(max_nodes² · R · max_depth) time and O(max_nodes · R · max_depth) memory (Sequoia §3.1,
// Algorithm 1 with "exactly k children = ranks 0..k−1" per node). Queries are then O(1)
// (expected_tokens) or O(n) (tree).
class SequoiaPlanner {
 public:
  // accept_by_rank: [R] probabilities a[r] in [0, 1] (finite); R may be 0 (then only the empty
  // tree is possible). max_nodes ≥ 0, max_depth ≥ 0 (depth is capped at max_nodes).
  // Throws std::invalid_argument on a value outside [0, 1], NaN, or a negative bound.
  SequoiaPlanner(std::span<const double> accept_by_rank, int max_nodes, int max_depth);

  int max_nodes() const { return max_n_; }
  int max_depth() const { return max_d_; }
  const std::vector<double>& accept_by_rank() const { return a_; }

  // E[tokens | N, D]: the best expected tokens per step (bonus included, so ≥ 1) over trees
  // with at most `node_budget` nodes and depth at most `depth`. Arguments are clamped to
  // [0, max_nodes] / [0, max_depth]. Non-decreasing in both.
  double expected_tokens(int node_budget, int depth) const;

  // A tree reaching expected_tokens(node_budget, depth), with the fewest nodes among those the
  // DP ties on (nodes of zero value are left out). Nodes are ordered by path probability, most
  // likely first (ties: shallower, then breadth-first order), so parents precede children and
  // every prefix of the list is ancestor-closed: cutting the shape to its first m nodes (e.g.
  // when the context is nearly full) keeps the m most valuable nodes.
  TreeShape tree(int node_budget, int depth) const;

 private:
  // Index helpers over the tables: level l = remaining depth of a subtree (its root counts 1),
  // m = node count of the subtree including its root.
  size_t ti(int l, int m) const { return static_cast<size_t>(l) * static_cast<size_t>(max_n_ + 2) + static_cast<size_t>(m); }
  size_t gi(int l, int j, int m) const {
    return (static_cast<size_t>(l) * static_cast<size_t>(R_ + 1) + static_cast<size_t>(j)) * static_cast<size_t>(max_n_ + 2) +
           static_cast<size_t>(m);
  }
  void build(int l, int m, int32_t parent, int32_t rank, int32_t depth, double prob, TreeShape& out) const;

  std::vector<double> a_;
  int R_ = 0, max_n_ = 0, max_d_ = 0;
  // T[l][m]: best Σ over a subtree with at most m nodes (root included, value 1) and at most
  // l levels. kids[l][m]: number of children of its root (−1 = same tree as T[l][m − 1]).
  std::vector<double> T_;
  std::vector<int32_t> kids_;
  // G[l][j][m]: best Σ_{i<j} a[i]·T[l][m_i] over splits Σ m_i ≤ m, m_i ≥ 1 (children ranks
  // 0..j−1 each heading a subtree of ≤ l levels); split[l][j][m] = m_{j−1} of the best split.
  std::vector<double> G_;
  std::vector<int32_t> split_;
};

// Convenience: the optimal tree for one (N, D). Same contract as SequoiaPlanner.
TreeShape sequoia_tree(std::span<const double> accept_by_rank, int node_budget, int depth);

}  // namespace specchat
