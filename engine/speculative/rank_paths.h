// Measured rank paths: the acceptance model behind `--tree auto` and optimal trees when the
// pair's calibration recorded them (issue 10; an alternative to Sequoia's independence model,
// Chen et al. 2024, §3.1).
//
// Sequoia models a draft tree's value with one acceptance-by-rank vector a[r], independent of
// depth and of the path: a node with rank path (r1, …, rd) is accepted with probability
// a[r1]·…·a[rd]. Acceptance is not independent: easy stretches of text accept long runs and
// hard ones none (on the bundled pair a chain of 3 accepts τ = 2.82 measured against 2.68
// modelled, so the model chose chains too short).
//
// Here the calibration's own sequences are the model. For each prompt, calibrate records the
// draft rank of every greedy target token given the true prefix (teacher forcing): rank r in
// [0, R), or R for a miss. In greedy decoding a tree node with rank path (r1, …, rd) drafted
// after position t is accepted exactly when the ranks at t + 1 … t + d are r1 … rd: along an
// accepted path the draft's context is the target's. So the value of a node is the share of
// start positions whose following ranks begin with its path, and a tree's expected tokens per
// step is 1 (the bonus token) plus the sum of its nodes' values. These values are additive and a
// child's never exceeds its parent's, so the best tree of N nodes is the N most frequent paths
// (no dynamic programme needed), and chains come out as the runs of rank 0 they really are.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/speculative/sequoia.h"

namespace specchat {

class RankPathModel {
 public:
  // sequences: [n_seq][len_i] ranks in [0, n_ranks] (n_ranks = a miss: the target's token had
  // rank ≥ n_ranks in the draft); max_depth ≥ 1 bounds the paths kept (deeper nodes are never
  // planned). Every start position u of a sequence contributes the path s[u], s[u + 1], … up to
  // its first miss, its end or max_depth ranks, and past a node seen fewer than kMinPathCount
  // times no deeper (nodes below it are left out: worth at most 1 / starts() each, they only
  // cost time and memory). The value of a node at depth d is its count over
  // the starts with at least d ranks left, capped at its parent's value (an end-of-sequence
  // effect could otherwise make a child worth more than its parent). Throws
  // std::invalid_argument for n_ranks < 1, max_depth < 1, a rank outside [0, n_ranks] or more
  // than kRankPathMaxNodes distinct paths.
  RankPathModel(std::span<const std::vector<int8_t>> sequences, int n_ranks, int max_depth);

  int n_ranks() const { return n_ranks_; }
  int max_depth() const { return max_depth_; }
  int64_t starts() const { return starts_; }  // start positions counted (ranks in all sequences)
  bool empty() const { return starts_ == 0; }

  // E[tokens per step] of a shape (TreeShape conventions: parents first; bonus included, so
  // ≥ 1): 1 + Σ over its nodes of their values; a node whose path was never seen (or is deeper
  // than max_depth) adds 0.
  double expected_tokens(const TreeShape& shape) const;

  // The tree of at most node_budget nodes and depth at most `depth` with the most expected
  // tokens: the most valuable paths (ties: shallower first, then smaller ranks), in that order,
  // so parents precede children and every prefix of the list is a tree. Fewer nodes when fewer
  // paths were seen. expected_tokens is set. depth is clamped to [0, max_depth()]; O(nodes).
  TreeShape best_tree(int node_budget, int depth) const;

  // The chain of k rank-0 nodes (k clamped to [0, max_depth()]) with its expected tokens:
  // 1 + Σ_{d ≤ k} P(the next d ranks are all 0).
  TreeShape chain(int k) const;

 private:
  struct Node {
    int32_t parent = -1;  // index into nodes_, -1 = a child of the root
    int32_t rank = 0;
    int32_t depth = 1;
    int32_t first_kid = -1, next_sibling = -1;  // the children as a list (at most n_ranks)
    int64_t count = 0;
    double value = 0;  // count / starts with ≥ depth ranks left, capped at the parent's value
  };
  // The child of `parent` (-1 = the root) with this rank: its index, or -1.
  int32_t child(int32_t parent, int rank) const;

  int n_ranks_ = 0, max_depth_ = 0;
  int64_t starts_ = 0;
  int32_t root_first_kid_ = -1;
  std::vector<Node> nodes_;
  std::vector<int32_t> order_;  // nodes_ by value (desc), then breadth-first (shallower first)
};

// A path is followed deeper only past prefixes seen at least this often (RankPathModel).
inline constexpr int64_t kMinPathCount = 2;

// Most nodes a RankPathModel builds (each distinct path prefix seen is one): bounds the memory
// a hostile calibration file can make it take (about 40 bytes a node).
inline constexpr int64_t kRankPathMaxNodes = int64_t{1} << 20;

// The deepest paths the planner models from rank paths: deeper chains and trees are not planned
// from a calibration (a chain of 32 accepted tokens is rare enough to be noise in a few thousand
// positions).
inline constexpr int kRankPathMaxDepth = 32;

// Fewest start positions a RankPathModel is planned from: below, a path's share is too rough to
// beat the acceptance vector (a calibration of one prompt and one token made optimal trees of
// one node).
inline constexpr int64_t kMinRankPathStarts = 256;

// The model of a calibration's rank paths (R ranks, paths up to max_depth), or null when there
// are fewer than kMinRankPathStarts ranks or they do not make one (a rank out of range, too many
// distinct paths). Never throws.
std::unique_ptr<RankPathModel> try_rank_path_model(std::span<const std::vector<int8_t>> sequences, int n_ranks,
                                                   int max_depth);

}  // namespace specchat
