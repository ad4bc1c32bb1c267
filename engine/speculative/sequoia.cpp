#include "engine/speculative/sequoia.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace specchat {

namespace {
constexpr double kNeg = -std::numeric_limits<double>::infinity();
// A larger tree must gain more than this to be preferred (sums of the same products taken in
// another order may differ in the last bits).
constexpr double kTol = 1e-12;
}  // namespace

int TreeShape::max_depth() const {
  return depth.empty() ? 0 : *std::max_element(depth.begin(), depth.end());
}

std::vector<int> TreeShape::level_widths() const {
  std::vector<int> w(static_cast<size_t>(max_depth()), 0);
  for (int32_t d : depth) w[static_cast<size_t>(d - 1)]++;
  return w;
}

bool TreeShape::is_chain() const {
  for (int32_t r : rank) {
    if (r != 0) return false;
  }
  return max_depth() == size();
}

SequoiaPlanner::SequoiaPlanner(std::span<const double> accept_by_rank, int max_nodes, int max_depth)
    : a_(accept_by_rank.begin(), accept_by_rank.end()) {
  if (max_nodes < 0 || max_depth < 0) throw std::invalid_argument("sequoia: negative node budget or depth");
  for (size_t r = 0; r < a_.size(); ++r) {
    if (!(a_[r] >= 0.0 && a_[r] <= 1.0)) {
      throw std::invalid_argument("sequoia: acceptance a[" + std::to_string(r) + "] = " + std::to_string(a_[r]) +
                                  " is not a probability");
    }
  }
  max_n_ = max_nodes;
  max_d_ = std::min(max_depth, max_nodes);
  R_ = static_cast<int>(a_.size());
  // Levels l = 0 .. max_d_ + 1 (the verification root heads max_d_ + 1 levels); subtree sizes
  // m = 0 .. max_n_ + 1 (the root plus max_n_ nodes).
  const int L = max_d_ + 2, M = max_n_ + 2;
  T_.assign(static_cast<size_t>(L) * static_cast<size_t>(M), 0.0);
  kids_.assign(T_.size(), 0);
  G_.assign(static_cast<size_t>(L) * static_cast<size_t>(R_ + 1) * static_cast<size_t>(M), kNeg);
  split_.assign(G_.size(), 0);
  for (int m = 1; m < M; ++m) T_[ti(1, m)] = 1.0;  // one level: the subtree is its root
  for (int l = 2; l < L; ++l) {
    // G over children heading subtrees of at most l − 1 levels.
    const int c = l - 1;
    for (int m = 0; m < M; ++m) G_[gi(c, 0, m)] = 0.0;
    for (int j = 1; j <= R_; ++j) {
      const double aj = a_[static_cast<size_t>(j - 1)];
      for (int m = j; m < M; ++m) {
        double best = kNeg;
        int32_t arg = 0;
        for (int s = 1; s <= m - (j - 1); ++s) {
          const double prev = G_[gi(c, j - 1, m - s)];
          if (prev == kNeg) continue;
          const double v = prev + aj * T_[ti(c, s)];
          if (v > best + kTol || best == kNeg) {
            best = v;
            arg = s;
          }
        }
        G_[gi(c, j, m)] = best;
        split_[gi(c, j, m)] = arg;
      }
    }
    for (int m = 1; m < M; ++m) {
      // The tree for m − 1 nodes unless more children gain something.
      double best = m > 1 ? T_[ti(l, m - 1)] : 1.0;
      int32_t k = m > 1 ? -1 : 0;
      for (int j = 1; j <= std::min(R_, m - 1); ++j) {
        const double g = G_[gi(c, j, m - 1)];
        if (g != kNeg && 1.0 + g > best + kTol) {
          best = 1.0 + g;
          k = j;
        }
      }
      T_[ti(l, m)] = best;
      kids_[ti(l, m)] = k;
    }
  }
}

double SequoiaPlanner::expected_tokens(int node_budget, int depth) const {
  const int n = std::clamp(node_budget, 0, max_n_), d = std::clamp(depth, 0, max_d_);
  return T_[ti(d + 1, n + 1)];
}

TreeShape SequoiaPlanner::tree(int node_budget, int depth) const {
  const int n = std::clamp(node_budget, 0, max_n_), d = std::clamp(depth, 0, max_d_);
  struct Item {
    int l, m;
    int32_t node;  // breadth-first index, −1 = the verification root
    int32_t depth;
    double prob;
  };
  struct Node {
    int32_t parent, rank, depth;
    double prob;
  };
  std::vector<Node> bfs;
  std::vector<Item> queue{{d + 1, n + 1, -1, 0, 1.0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    Item it = queue[q];
    while (kids_[ti(it.l, it.m)] < 0) --it.m;
    const int k = kids_[ti(it.l, it.m)];
    // Sizes of the children's subtrees, recovered from the split table backwards.
    std::vector<int> sizes(static_cast<size_t>(k));
    int rem = it.m - 1;
    for (int j = k; j >= 1; --j) {
      sizes[static_cast<size_t>(j - 1)] = split_[gi(it.l - 1, j, rem)];
      rem -= sizes[static_cast<size_t>(j - 1)];
    }
    for (int j = 0; j < k; ++j) {
      const double p = it.prob * a_[static_cast<size_t>(j)];
      bfs.push_back({it.node, j, it.depth + 1, p});
      queue.push_back({it.l - 1, sizes[static_cast<size_t>(j)], static_cast<int32_t>(bfs.size() - 1), it.depth + 1, p});
    }
  }
  // Most likely first; a child's probability never exceeds its parent's (a ≤ 1), and on equal
  // probability the shallower node comes first, so parents still precede children.
  std::vector<int32_t> order(bfs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    const Node &a = bfs[static_cast<size_t>(x)], &b = bfs[static_cast<size_t>(y)];
    if (a.prob != b.prob) return a.prob > b.prob;
    return a.depth < b.depth;
  });
  std::vector<int32_t> pos(bfs.size());
  for (size_t i = 0; i < order.size(); ++i) pos[static_cast<size_t>(order[i])] = static_cast<int32_t>(i);
  TreeShape out;
  out.expected_tokens = 1.0;
  for (int32_t v : order) {
    const Node& nd = bfs[static_cast<size_t>(v)];
    out.parent.push_back(nd.parent < 0 ? -1 : pos[static_cast<size_t>(nd.parent)]);
    out.rank.push_back(nd.rank);
    out.depth.push_back(nd.depth);
    out.expected_tokens += nd.prob;
  }
  return out;
}

TreeShape sequoia_tree(std::span<const double> accept_by_rank, int node_budget, int depth) {
  return SequoiaPlanner(accept_by_rank, node_budget, depth).tree(node_budget, depth);
}

}  // namespace specchat
