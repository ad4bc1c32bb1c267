// The MTP head as a Drafter (DeepSeek-V3 §2.2 shape, one module applied recursively;
// docs/design/target-feature-drafters.md, "Context features" and "MTP head").
//
// One MtpDrafter per sequence. It holds one context row per committed token except the last:
// row i (position i) was computed from the target's hidden state h_i (hidden layer n_layer − 1)
// and the token t_{i+1}; the engine hands rows over with observe() after the target's forwards.
//
// Drafting after committed t_0 … t_{n−1} (rows 0 … n−2 held): depth 1 reads the logits of row
// n−2 (they predict t_n); a node at depth j > 1 gets a temporary row at position n−2+j−1 fed
// with h = g of its parent's row and the parent's token, attending to the context rows and to
// its ancestors' temporary rows (tree attention); its logits give its children. Temporary rows
// are dropped after proposing (the target's real hidden states replace them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/drafters/mtp_model.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/drafter.h"

namespace specchat {

class MtpDrafter : public Drafter {
 public:
  // model: a head bound to `target` (MtpModel::load(path, target)); shared by every sequence's
  // drafter. target: the model whose hidden states observe() receives (only its config is read:
  // n_layer for the tap). seq: the engine's sequence (KV pool slot) this drafter serves, kept
  // for the caller's bookkeeping (the head's rows live in this object, not in a pool).
  MtpDrafter(std::shared_ptr<const MtpModel> model, const LlamaModel& target, int seq = 0);

  // {n_layer − 1}: the residual stream after the target's last layer (before its final norm).
  std::vector<int32_t> target_taps() const override { return {tap_}; }
  int n_observed() const override { return state_.n; }
  // Appends rows for ctx[pos0, pos0 + h.n_rows): tokens = ctx[pos0, pos0 + n + 1) (the rows'
  // tokens and their successor). std::invalid_argument when pos0 != n_observed(), tokens.size()
  // != n + 1, tokens[0] is not the successor recorded with the previous row (the context
  // changed: call sync first), h lacks the tap or has another width.
  void observe(int pos0, std::span<const int32_t> tokens, const HiddenRows& h) override;
  // Keeps the rows of the longest prefix shared with ctx (row i needs ctx[0, i + 1] unchanged),
  // at most ctx.size() − 1.
  void sync(std::span<const int32_t> ctx) override { cut_to(ctx); }
  void finished(std::span<const int32_t> ctx) override { cut_to(ctx); }
  void clear() override;

  // chain: k = min(node_budget, max_nodes) tokens; greedy takes the argmax (deterministic),
  // T > 0 draws each from the processed q (ChildSampling::with_replacement).
  // dynamic: EAGLE-2 style (Li et al. 2024 §4.1): root children are the top-`branch` tokens of
  // row n−2; for depth 2 … `depth` the top-`branch` nodes of the newest level (by cumulative log
  // softmax of the raw logits) get their temporary rows in one batch and top-`branch` children
  // each; the best max_nodes nodes are kept. Children are deterministic (q one-hot in
  // acceptance), so the rule stays lossless at any temperature.
  // optimal (a static Sequoia shape, TreeBudget::shape_parent/shape_rank): node i takes the
  // rank-th most likely token of its parent's row (the same ranking), nodes past max_nodes and
  // those whose parent was cut are skipped; deterministic children.
  // Empty tree when the drafter does not hold exactly n − 1 rows of ctx (nothing observed yet).
  // GenerationError("non_finite_draft_logits") when the head produces NaN/inf logits.
  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                    const SamplingParams& params, Rng& rng) override;

  // The chain of propose(), with its draws made through `draws` (RngChoices in production; the
  // exactness tests enumerate every draw with weights). Empty as propose().
  DraftTree propose_chain(std::span<const int32_t> ctx, int k, const SamplingParams& params, Choices& draws);

  // Logits [n_vocab] the head gives after committed ctx followed by `path` (drafted tokens):
  // path empty = the last context row's; else the temporary row of path's last token, fed
  // along the path as a chain of temporary rows (dropped afterwards). For tests of tree
  // attention and the reference vectors. Empty when the rows do not match ctx (as propose).
  std::vector<float> logits_after(std::span<const int32_t> ctx, std::span<const int32_t> path);

  // Logits [tree.size(), n_vocab] after every node of `tree` (drafted after ctx), computed with
  // temporary rows fed depth by depth with tree attention, as propose()'s dynamic trees are.
  // For tests. Empty when the rows do not match ctx.
  std::vector<float> tree_logits(std::span<const int32_t> ctx, const DraftTree& tree);
  // g_i [d_model] of context row i in [0, n_observed()) (the layer's output). For tests.
  std::span<const float> row_output(int i) const;

  const MtpModel& model() const { return *model_; }
  int seq() const { return seq_; }

 private:
  void cut_to(std::span<const int32_t> ctx);
  // True when the rows are exactly those of ctx[0, n − 1) (and ctx[n − 1] their last successor).
  bool holds(std::span<const int32_t> ctx) const;
  // Logits of `n` rows of g into logits_ (checked finite); returns row r's view.
  std::span<const float> head_logits(const float* g, int n);
  class Nodes;  // the NodeSource over the head's rows (TreeBuilder)
  // propose() with its draws through `draws`.
  DraftTree build(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes, const SamplingParams& params,
                  Choices& draws);
  // Feeds the temporary rows of `nodes` of t (each node's parent fed already, or a root child)
  // in one tree-masked batch; records their slots/g in node_slot_/node_g_ and returns their
  // logits [nodes.size(), n_vocab]. n: committed context length.
  std::span<const float> feed_nodes(const DraftTree& t, std::span<const int32_t> nodes, int n);

  std::shared_ptr<const MtpModel> model_;
  int32_t tap_;
  int seq_;
  MtpState state_;             // context rows' K/V in slots [0, n_observed()), then temporaries
  std::vector<int32_t> toks_;  // ctx[0, n_observed() + 1) once a row is held, else empty
  std::vector<float> g_;       // [n_observed(), d_model] the layer's output of each context row
  std::vector<float> logits_;  // scratch [rows, n_vocab]
  // While drafting a tree: per node its temporary row's slot (−1 = not fed) and g [d_model].
  std::vector<int32_t> node_slot_;
  std::vector<float> node_g_;
  std::vector<float> h_, gout_;   // feed_nodes' scratch
  std::vector<int32_t> feed_toks_, feed_pos_;
  std::vector<float> gcur_, gnext_;  // logits_after: g of the current / next row [d_model]
  std::vector<uint8_t> mask_;
};

}  // namespace specchat
