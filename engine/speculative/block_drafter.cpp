#include "engine/speculative/block_drafter.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/generator.h"
#include "engine/sampler.h"
#include "engine/speculative/tree_builder.h"

namespace specchat {

namespace {

// The block's rows as a NodeSource: a slot at depth d (the root: 0) gets the marginal of depth
// d + 1 (row d of the block), whatever its own token; none past the block's last row.
class BlockNodes final : public LogitsSource {
 public:
  BlockNodes(const std::vector<float>& logits, int n_depth, size_t n_vocab)
      : logits_(logits), n_depth_(n_depth), nv_(n_vocab) {}
  void score(const DraftTree& t, std::span<const int32_t> slots) override {
    std::vector<const float*> rows;
    for (int32_t s : slots) {
      const int d = s == 0 ? 0 : t.nodes[static_cast<size_t>(s - 1)].depth;
      rows.push_back(d < n_depth_ ? logits_.data() + static_cast<size_t>(d) * nv_ : nullptr);
    }
    set_rows(std::move(rows), nv_);
  }
  bool free_scoring() const override { return true; }  // the block's rows are computed already

 private:
  const std::vector<float>& logits_;
  int n_depth_;
  size_t nv_;
};

// Deepest node of the first `n` nodes of a static shape (parents first).
int shape_depth(const TreeBudget& b, int n) {
  n = std::min<int>(n, static_cast<int>(std::min(b.shape_parent.size(), b.shape_rank.size())));
  std::vector<int> d(static_cast<size_t>(std::max(n, 0)), 1);
  int deepest = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t p = b.shape_parent[static_cast<size_t>(i)];
    if (p >= 0 && p < i) d[static_cast<size_t>(i)] = d[static_cast<size_t>(p)] + 1;
    deepest = std::max(deepest, d[static_cast<size_t>(i)]);
  }
  return deepest;
}

}  // namespace

BlockDrafter::BlockDrafter(std::shared_ptr<const DFlashModel> model) : m_(std::move(model)) {
  if (!m_) throw std::invalid_argument("BlockDrafter: no model");
  state_ = m_->new_state();
  const int B = m_->block_size();
  logits_.resize(static_cast<size_t>(B - 1) * static_cast<size_t>(m_->config().n_vocab));
}

std::vector<int32_t> BlockDrafter::target_taps() const { return m_->config().taps; }

void BlockDrafter::keep_common(std::span<const int32_t> ctx, size_t limit) {
  size_t n = 0;
  const size_t upto = std::min({tokens_.size(), ctx.size(), limit});
  while (n < upto && tokens_[n] == ctx[n]) ++n;
  tokens_.resize(n);
  state_.truncate(static_cast<int>(n));
}

void BlockDrafter::sync(std::span<const int32_t> ctx) {
  keep_common(ctx, ctx.empty() ? 0 : ctx.size() - 1);
}

void BlockDrafter::finished(std::span<const int32_t> ctx) { keep_common(ctx, ctx.size()); }

void BlockDrafter::clear() {
  tokens_.clear();
  state_.truncate(0);
}

void BlockDrafter::observe(int pos0, std::span<const int32_t> tokens, const HiddenRows& h) {
  if (pos0 != n_observed()) {
    throw std::invalid_argument("BlockDrafter::observe: rows start at " + std::to_string(pos0) + " but " +
                                std::to_string(n_observed()) + " are held");
  }
  if (h.n_rows < 0 || tokens.size() != static_cast<size_t>(h.n_rows) + 1) {
    throw std::invalid_argument("BlockDrafter::observe: " + std::to_string(tokens.size()) + " tokens for " +
                                std::to_string(h.n_rows) + " rows (want rows + 1)");
  }
  m_->append_context(state_, pos0, h);
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end() - 1);
}

DraftTree BlockDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                                const SamplingParams& params, Rng& rng) {
  const int n = static_cast<int>(ctx.size());
  if (n == 0) return {};
  keep_common(ctx, ctx.size() - 1);
  const int B = m_->block_size();
  if (n_observed() == 0 || max_nodes <= 0 || budget.node_budget <= 0) return {};
  // Only the depths this tree can reach get logits.
  const int tree_depth = budget.mode == TreeMode::chain     ? budget.node_budget
                         : budget.mode == TreeMode::optimal ? shape_depth(budget, std::min(budget.node_budget, max_nodes))
                                                            : std::max(1, budget.depth);
  const int n_depth = std::min({tree_depth, budget.node_budget, max_nodes, B - 1});
  if (n_depth <= 0) return {};
  // The block's width: the anchor and the n_depth positions that get logits, no more. The MASK
  // rows past the deepest drafted position only cost time: with the bundled drafter (trained on
  // blocks of 8 and 16) cutting them left τ unchanged (chain k = 3: 2.72 against 2.73 with 8
  // rows) and raised decode tokens/s by 9–36 % for k = 1 … 4 (`calibrate --drafter block`,
  // 12 held-out prompts; 2026-12-01).
  const int width = std::max(2, n_depth + 1);
  if (n - 1 + width > m_->n_pos()) return {};
  m_->draft_block(state_, ctx[static_cast<size_t>(n - 1)], n - 1, logits_, n_depth, width);
  const size_t nv = static_cast<size_t>(m_->config().n_vocab);
  if (!all_finite(std::span<const float>(logits_).first(static_cast<size_t>(n_depth) * nv))) {
    throw GenerationError("non_finite_draft_logits",
                          "the DFlash drafter produced NaN or infinite logits (" + m_->path() + "): its weights are damaged");
  }
  // Chains stop at the block's last row; trees see the block's rows only (BlockNodes).
  TreeBudget b = budget;
  if (b.mode == TreeMode::dynamic) b.depth = std::min(std::max(1, b.depth), n_depth);
  if (b.mode == TreeMode::chain) max_nodes = std::min(max_nodes, n_depth);
  BlockNodes src(logits_, n_depth, nv);
  RngChoices choices(rng);
  return build_tree(src, b, max_nodes, params, choices);
}

}  // namespace specchat
