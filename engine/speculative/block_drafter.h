// BlockDrafter: the DFlash block drafter (engine/drafters/dflash_model.h) as a Drafter. One
// forward gives the marginals q_1 … q_{B−1} of the next B − 1 tokens; chains and trees are
// built from them by TreeBuilder (docs/design/target-feature-drafters.md, "Trees from a block's
// marginals"): a node at depth d gets its children from q_{d+1}, whatever its own token, so
// every shape (chain, dynamic, optimal) costs one block forward.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/drafters/dflash_model.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/drafter.h"

namespace specchat {

// One per sequence (KV slot): it owns that sequence's context rows (DFlashState). The model is
// shared by all of them (immutable; its forwards use its thread pool, so one thread at a time
// drives the drafters of one model, as the engine thread does).
//
// Context rows (the invariant of the design page): after observe() the drafter holds a row for
// each committed token except the last; it remembers each row's token so sync() / propose() /
// finished() can keep exactly the rows of the prefix shared with a new context.
//
// propose(ctx): anchor = ctx.back() at position n − 1, rows cut to the prefix shared with ctx
// (at most n − 1); no rows or no room → empty tree. The block is as wide as the tree is deep
// (anchor + depth rows, DFlashModel::draft_block's `width`), not B: the MASK rows past the
// deepest drafted position only cost time. If fewer than n − 1 rows are held (the
// engine has not observed every token yet) it still drafts from the rows it has: quality
// drops, the verification stays lossless. Chains draw from the marginals processed with the
// request's SamplingParams (as ModelDrafter); trees rank candidates by the drafter's plain
// softmax (T = 1: the processed greedy q is one-hot and would make every tree a chain — any
// fixed ranking keeps deterministic children lossless, as for ModelDrafter's trees).
// Throws GenerationError("non_finite_draft_logits") when the block's logits are NaN/inf.
class BlockDrafter : public Drafter {
 public:
  // model: loaded and bound to the target by DFlashModel::load (the target whose forwards feed
  // observe()). Allocates the sequence's state.
  explicit BlockDrafter(std::shared_ptr<const DFlashModel> model);

  void sync(std::span<const int32_t> ctx) override;
  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                    const SamplingParams& params, Rng& rng) override;
  // Keeps the rows of the longest prefix shared with the final context.
  void finished(std::span<const int32_t> ctx) override;
  void clear() override;
  std::vector<int32_t> target_taps() const override;
  int n_observed() const override { return state_.n_rows(); }
  // Appends rows for ctx[pos0, pos0 + h.n_rows); tokens = ctx[pos0, pos0 + h.n_rows + 1).
  // std::invalid_argument on a gap (pos0 != n_observed()), tokens.size() != h.n_rows + 1, a
  // missing tap or a width mismatch (DFlashModel::append_context).
  void observe(int pos0, std::span<const int32_t> tokens, const HiddenRows& h) override;

  const DFlashModel& model() const { return *m_; }

 private:
  // Cuts rows to the prefix shared with ctx, at most `limit`.
  void keep_common(std::span<const int32_t> ctx, size_t limit);
  std::shared_ptr<const DFlashModel> m_;
  DFlashState state_;
  std::vector<int32_t> tokens_;  // [n_observed] the committed token of each row
  std::vector<float> logits_;    // [B − 1, n_vocab]
};

}  // namespace specchat
