// TreeBuilder: the draft tree's shape, apart from the drafter that scores it (chain, dynamic
// EAGLE-2 trees, static Sequoia trees), so every drafter can use every shape
// (../shared/design/ARCHITECTURE.md §3: a Drafter proposes, a TreeBuilder shapes).
//
// A drafter is a NodeSource: asked for a set of tree slots, it scores the children each slot
// may have (a draft model feeds the slots' nodes in one tree-masked forward; a block drafter
// reads its per-depth marginals; the n-gram drafter looks the path up in the context). The
// builder decides which slots to score, in rounds (one round = at most one draft forward), and
// which candidates become nodes. It is a resumable state machine (wanted / advance / finish),
// so the engine can put the rounds of several sequences into one draft forward; build_tree()
// runs it to the end for one source.
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/draft_tree.h"
#include "engine/speculative/drafter.h"

namespace specchat {

// A token a slot may take as its child, with its draft log-probability (natural log).
struct Candidate {
  double logp = 0.0;
  int32_t token = 0;
};

// What a TreeBuilder asks of a drafter. Slots: 0 = the root (the last committed token), v + 1 =
// node v of the tree being built.
class NodeSource {
 public:
  virtual ~NodeSource() = default;
  // Scores the children of `slots` ([n_rows], parents first; every slot's node is in `tree`,
  // and its parent slot was scored by an earlier call or is the root). Row r of the later top()
  // and distribution() calls is slots[r]; rows of earlier calls are gone. May run a draft
  // forward; throws what the drafter throws (GenerationError "non_finite_draft_logits").
  virtual void score(const DraftTree& tree, std::span<const int32_t> slots) = 0;
  // The best `k` candidates of row r, log-probability descending (ties: lower id first), into
  // `out` (cleared first; fewer when the row has fewer). This ranking shapes trees; children
  // chosen by it are a fixed function of the draft (ChildSampling::deterministic).
  virtual void top(int r, int k, std::vector<Candidate>& out) = 0;
  // Chains: the processed distribution (params: temperature, top-k, top-p) that row r's child
  // is drawn from, into q; false when the drafter has none (the n-gram drafter: a chain then
  // takes top(r, 1)).
  virtual bool distribution(int /*r*/, const SamplingParams& /*params*/, Distribution& /*q*/) { return false; }
  // More tree nodes score() can take this tree (a draft model's KV room); INT_MAX = no limit.
  virtual int room() const { return INT_MAX; }
  // Scoring a slot costs no forward (a block drafter's marginals, n-gram lookup): dynamic trees
  // then grow best-first, one node per round (see TreeBuilder), instead of level by level.
  virtual bool free_scoring() const { return false; }
};

// A NodeSource whose rows are draft logits ([n_rows] rows of n_vocab floats, of which the
// first n_ids may be proposed: a draft whose vocabulary is larger than the target's proposes
// only shared ids). Subclasses score() by calling set_rows.
class LogitsSource : public NodeSource {
 public:
  // top: plain softmax (T = 1) log-probabilities of the best k logits (the ranking EAGLE-2 and
  // Sequoia expand by; any fixed ranking keeps deterministic children lossless).
  void top(int r, int k, std::vector<Candidate>& out) override;
  // process_logits(row r, params).
  bool distribution(int r, const SamplingParams& params, Distribution& q) override;

 protected:
  // rows[r] points at row r's logits (n_vocab floats, valid until the next score()); null: the
  // row has no children (no candidates, an empty distribution).
  void set_rows(std::vector<const float*> rows, size_t n_ids);
  // Rows contiguous at `logits` with stride `n_vocab` ([n_rows, n_vocab]).
  void set_rows(std::span<const float> logits, size_t n_vocab, size_t n_ids);

 private:
  std::vector<const float*> rows_;
  size_t n_ids_ = 0;
  SamplerScratch scratch_;
};

// The state machine behind build_tree. Chain: k = min(node_budget, max_nodes) tokens, one slot
// per round; a greedy chain takes the argmax of the processed q (deterministic children), a
// sampled one draws from q through `choices` (ChildSampling::with_replacement, child_q = q);
// a source without distributions gives top-1 (deterministic). Dynamic (EAGLE-2, Li et al. 2024
// §4.1): the root's top-`branch` children, then for depth 2 … `depth` the best `branch` nodes
// of the newest level (by cumulative log-probability) are scored in one round and get their
// top-`branch` children; the best min(node_budget, max_nodes) nodes are kept (ancestor-closed).
// Over a source with free_scoring() the dynamic tree grows best-first instead: the best
// candidate of the whole frontier (by cumulative log-probability; ties to the earlier) becomes
// the next node and, above `depth`, is scored for its top-`branch` children, until the node
// budget is reached: the best tree the budget allows over that ranking.
// Optimal (Sequoia, Chen et al. 2024 §3.3): the static shape TreeBudget::shape_parent /
// shape_rank, level by level: shape node i takes the rank-th candidate of its parent's row;
// nodes past min(node_budget, max_nodes) and those whose parent or rank is missing are skipped.
// Node logp is the cumulative log-probability of its path (chains: of the processed q).
// The source's room() bounds the scored nodes (a round that does not fit ends the tree).
class TreeBuilder {
 public:
  // max_nodes ≤ 0 or node_budget ≤ 0 gives an empty tree at once (wanted() empty).
  // std::invalid_argument for a static shape that lists a child before its parent.
  TreeBuilder(const TreeBudget& budget, int max_nodes, const SamplingParams& params);
  // Slots to score next (empty: done).
  const std::vector<int32_t>& wanted() const { return wanted_; }
  // The tree scored so far: wanted()'s nodes are in it.
  const DraftTree& tree() const { return all_; }
  // Reads the rows of the last source.score(tree(), wanted()) and plans the next round.
  void advance(NodeSource& source, Choices& choices);
  // The final tree. from (optional): per node of the result, its index in tree() (dynamic
  // trees drop nodes; others keep every node, from[i] == i).
  DraftTree finish(std::vector<int32_t>* from = nullptr);

 private:
  void plan_static_level(int d);
  TreeBudget b_;
  int cap_ = 0;  // min(node_budget, max_nodes)
  SamplingParams params_;
  DraftTree all_;
  std::vector<int32_t> wanted_;
  int depth_ = 0;                 // deepest level added so far
  std::vector<int32_t> level_;    // dynamic: nodes of the newest level
  std::vector<int32_t> sdepth_;   // static: depth of each shape node
  std::vector<int32_t> made_;     // static: tree node of each shape node (−1 = none)
  int max_rank_ = 0;
  // Dynamic best-first (free_scoring sources): candidates not yet taken.
  struct Pending {
    double logp;
    uint64_t order;  // insertion order: ties go to the earlier
    int32_t token, parent, depth;
  };
  std::vector<Pending> frontier_;  // a heap (std::push_heap with later_first)
  uint64_t n_pushed_ = 0;
  void best_first(NodeSource& src, int32_t slot);
  std::vector<Candidate> cand_;
  Distribution q_;
};

// Runs a TreeBuilder on one source to the end: the tree for `budget` (see TreeBuilder).
DraftTree build_tree(NodeSource& source, const TreeBudget& budget, int max_nodes, const SamplingParams& params,
                     Choices& choices, std::vector<int32_t>* from = nullptr);

}  // namespace specchat
