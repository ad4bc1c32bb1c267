#include "engine/speculative/rank_paths.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace specchat {

RankPathModel::RankPathModel(std::span<const std::vector<int8_t>> sequences, int n_ranks, int max_depth)
    : n_ranks_(n_ranks), max_depth_(max_depth) {
  if (n_ranks < 1) throw std::invalid_argument("RankPathModel: n_ranks must be at least 1");
  if (max_depth < 1) throw std::invalid_argument("RankPathModel: max_depth must be at least 1");
  // starts_at_least[d − 1]: starts with at least d ranks left (the denominator at depth d).
  std::vector<int64_t> starts_at_least(static_cast<size_t>(max_depth), 0);
  // Every start position, walked one level at a time: a start whose path so far ends in a node
  // seen fewer than kMinPathCount times goes no deeper (its deeper nodes could only be seen as
  // rarely; without this, nearly every start made a node of its own at every level: 200,000
  // nodes and 10-40 ms for the bundled pair's 7,410 ranks, on every request).
  struct Start {
    const int8_t* ranks;  // the ranks from this start on
    int64_t left;         // how many
    int32_t node;         // the node its path so far ends in (-1 = the root)
  };
  std::vector<Start> alive;
  for (const std::vector<int8_t>& seq : sequences) {
    const int64_t len = static_cast<int64_t>(seq.size());
    for (int8_t r : seq) {
      if (r < 0 || r > n_ranks) {
        throw std::invalid_argument("RankPathModel: rank " + std::to_string(r) + " outside [0, " + std::to_string(n_ranks) + "]");
      }
    }
    starts_ += len;
    for (int d = 1; d <= max_depth; ++d) starts_at_least[static_cast<size_t>(d - 1)] += std::max<int64_t>(0, len - d + 1);
    for (int64_t u = 0; u < len; ++u) alive.push_back({seq.data() + u, len - u, -1});
  }
  for (int d = 1; d <= max_depth && !alive.empty(); ++d) {
    size_t kept = 0;
    for (const Start& st : alive) {
      if (st.left < d) continue;  // the sequence ends here
      const int r = st.ranks[d - 1];
      if (r == n_ranks) continue;  // a miss: no node of the tree holds this token
      int32_t next = child(st.node, r);
      if (next < 0) {
        if (static_cast<int64_t>(nodes_.size()) >= kRankPathMaxNodes) {
          throw std::invalid_argument("RankPathModel: more than " + std::to_string(kRankPathMaxNodes) + " distinct paths");
        }
        Node n;
        n.parent = st.node;
        n.rank = r;
        n.depth = d;
        next = static_cast<int32_t>(nodes_.size());
        int32_t& head = st.node < 0 ? root_first_kid_ : nodes_[static_cast<size_t>(st.node)].first_kid;
        n.next_sibling = head;
        head = next;
        nodes_.push_back(n);
      }
      nodes_[static_cast<size_t>(next)].count++;
      alive[kept++] = {st.ranks, st.left, next};
    }
    alive.resize(kept);
    kept = 0;
    for (const Start& st : alive) {
      if (nodes_[static_cast<size_t>(st.node)].count >= kMinPathCount) alive[kept++] = st;
    }
    alive.resize(kept);
  }
  // Breadth-first (shallower first; siblings by rank) so parents get their values first, and
  // that order breaks ties between equal values.
  std::vector<int32_t> bfs;
  bfs.reserve(nodes_.size());
  std::vector<int32_t> kids;
  auto push_kids = [&](int32_t first) {
    kids.clear();
    for (int32_t k = first; k >= 0; k = nodes_[static_cast<size_t>(k)].next_sibling) kids.push_back(k);
    std::sort(kids.begin(), kids.end(), [&](int32_t a, int32_t b) {
      return nodes_[static_cast<size_t>(a)].rank < nodes_[static_cast<size_t>(b)].rank;
    });
    bfs.insert(bfs.end(), kids.begin(), kids.end());
  };
  push_kids(root_first_kid_);
  for (size_t i = 0; i < bfs.size(); ++i) {
    Node& n = nodes_[static_cast<size_t>(bfs[i])];
    const int64_t denom = starts_at_least[static_cast<size_t>(n.depth - 1)];
    n.value = denom > 0 ? static_cast<double>(n.count) / static_cast<double>(denom) : 0.0;
    if (n.parent >= 0) n.value = std::min(n.value, nodes_[static_cast<size_t>(n.parent)].value);
    push_kids(n.first_kid);
  }
  order_ = bfs;
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return nodes_[static_cast<size_t>(a)].value > nodes_[static_cast<size_t>(b)].value;
  });
}

int32_t RankPathModel::child(int32_t parent, int rank) const {
  for (int32_t k = parent < 0 ? root_first_kid_ : nodes_[static_cast<size_t>(parent)].first_kid; k >= 0;
       k = nodes_[static_cast<size_t>(k)].next_sibling) {
    if (nodes_[static_cast<size_t>(k)].rank == rank) return k;
  }
  return -1;
}

double RankPathModel::expected_tokens(const TreeShape& shape) const {
  // The trie node of each shape node (parents come first), -1 when its path was never seen.
  std::vector<int32_t> at(static_cast<size_t>(shape.size()), -1);
  double e = 1.0;
  for (int i = 0; i < shape.size(); ++i) {
    const int32_t p = shape.parent[static_cast<size_t>(i)];
    if (p >= 0 && at[static_cast<size_t>(p)] < 0) continue;
    const int32_t n = child(p < 0 ? -1 : at[static_cast<size_t>(p)], shape.rank[static_cast<size_t>(i)]);
    at[static_cast<size_t>(i)] = n;
    if (n >= 0) e += nodes_[static_cast<size_t>(n)].value;
  }
  return e;
}

TreeShape RankPathModel::best_tree(int node_budget, int depth) const {
  TreeShape s;
  depth = std::clamp(depth, 0, max_depth_);
  if (node_budget <= 0 || depth == 0) return s;
  std::vector<int32_t> index(nodes_.size(), -1);  // trie node -> shape node
  for (int32_t n : order_) {
    if (s.size() >= node_budget) break;
    const Node& nd = nodes_[static_cast<size_t>(n)];
    if (nd.depth > depth || nd.value <= 0) continue;
    // A parent is never after its child in order_ (value capped, ties shallower first).
    const int32_t parent = nd.parent < 0 ? -1 : index[static_cast<size_t>(nd.parent)];
    if (nd.parent >= 0 && parent < 0) continue;
    index[static_cast<size_t>(n)] = s.size();
    s.parent.push_back(parent);
    s.rank.push_back(nd.rank);
    s.depth.push_back(nd.depth);
    s.expected_tokens += nd.value;
  }
  return s;
}

TreeShape RankPathModel::chain(int k) const {
  TreeShape s;
  k = std::clamp(k, 0, max_depth_);
  int32_t node = -1;
  for (int d = 1; d <= k; ++d) {
    s.parent.push_back(d - 2);
    s.rank.push_back(0);
    s.depth.push_back(d);
    if (d == 1 || node >= 0) node = child(node, 0);
    if (node >= 0) s.expected_tokens += nodes_[static_cast<size_t>(node)].value;
  }
  return s;
}

std::unique_ptr<RankPathModel> try_rank_path_model(std::span<const std::vector<int8_t>> sequences, int n_ranks,
                                                   int max_depth) {
  try {
    auto m = std::make_unique<RankPathModel>(sequences, n_ranks, max_depth);
    if (m->starts() < kMinRankPathStarts) return nullptr;
    return m;
  } catch (const std::exception&) {
    return nullptr;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace specchat
