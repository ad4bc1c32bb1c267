#include "engine/speculative/block_drafter.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <stdexcept>

#include "engine/generator.h"

namespace specchat {

DraftTree tree_from_marginals(std::span<const Distribution> q, const TreeBudget& budget, int max_nodes, bool sample,
                              Choices& choices) {
  const int n_depth = static_cast<int>(q.size());
  const int n_max = std::min(budget.node_budget, max_nodes);
  DraftTree t;
  if (n_max <= 0 || n_depth == 0) return t;
  if (budget.mode == TreeMode::chain) {
    const int k = std::min(n_max, n_depth);
    double logp = 0;
    for (int j = 0; j < k; ++j) {
      const Distribution& qj = q[static_cast<size_t>(j)];
      if (qj.ids.empty()) break;
      const int32_t tok = sample ? choices.draw(qj) : qj.ids[0];
      const double pr = qj.prob(tok);
      logp += pr > 0 ? std::log(pr) : -1e30;
      // Sampled children were drawn from q (the rule needs it); the argmax is a fixed function
      // of q (one-hot in the rule: deterministic, no copy of q needed).
      if (sample) t.set_children_source(j, qj, ChildSampling::with_replacement);
      t.add(tok, j - 1, logp);
    }
    return t;
  }
  // A tree from marginals: best-first by cumulative log q over candidates shared by depth.
  const int K = std::max(1, budget.branch);
  const int D = std::min(std::max(1, budget.depth), n_depth);
  struct Cand {
    double logp;
    int32_t token;
  };
  std::vector<std::vector<Cand>> cand(static_cast<size_t>(D));
  for (int j = 0; j < D; ++j) {
    const Distribution& qj = q[static_cast<size_t>(j)];
    for (size_t i = 0; i < qj.ids.size() && static_cast<int>(cand[static_cast<size_t>(j)].size()) < K; ++i) {
      if (qj.probs[i] > 0) cand[static_cast<size_t>(j)].push_back({std::log(qj.probs[i]), qj.ids[i]});
    }
  }
  struct Item {
    double logp;
    uint64_t seq;  // insertion order: ties go to the earlier (parents before children, siblings in q order)
    int32_t token, parent, depth;
  };
  auto worse = [](const Item& a, const Item& b) { return a.logp < b.logp || (a.logp == b.logp && a.seq > b.seq); };
  std::priority_queue<Item, std::vector<Item>, decltype(worse)> frontier(worse);
  uint64_t seq = 0;
  for (const Cand& c : cand[0]) frontier.push({c.logp, seq++, c.token, -1, 1});
  while (t.size() < n_max && !frontier.empty()) {
    const Item it = frontier.top();
    frontier.pop();
    const int32_t v = t.add(it.token, it.parent, it.logp);
    if (it.depth < D) {
      for (const Cand& c : cand[static_cast<size_t>(it.depth)]) frontier.push({it.logp + c.logp, seq++, c.token, v, it.depth + 1});
    }
  }
  return t;  // every slot's children are deterministic (the default), q unused by the rule
}

namespace {

// The `k` largest logits as a Distribution of plain-softmax (T = 1) probabilities (not
// renormalised over the k), descending, lower id first on ties: the greedy tree's ranking.
void top_k_softmax(std::span<const float> logits, int k, Distribution& out) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  out.ids.clear();
  out.probs.clear();
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (static_cast<int>(out.ids.size()) == k && !better(id, out.ids.back())) continue;
    out.ids.insert(std::upper_bound(out.ids.begin(), out.ids.end(), id, better), id);
    if (static_cast<int>(out.ids.size()) > k) out.ids.pop_back();
  }
  for (int32_t id : out.ids) out.probs.push_back(std::exp(static_cast<double>(logits[static_cast<size_t>(id)] - mx)) / sum);
}

}  // namespace

BlockDrafter::BlockDrafter(std::shared_ptr<const DFlashModel> model) : m_(std::move(model)) {
  if (!m_) throw std::invalid_argument("BlockDrafter: no model");
  state_ = m_->new_state();
  const int B = m_->block_size();
  logits_.resize(static_cast<size_t>(B - 1) * static_cast<size_t>(m_->config().n_vocab));
  q_.resize(static_cast<size_t>(B - 1));
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
  const int n_depth = budget.mode == TreeMode::chain
                          ? std::min({budget.node_budget, max_nodes, B - 1})
                          : std::min({std::max(1, budget.depth), budget.node_budget, max_nodes, B - 1});
  // The block's width: the anchor and the n_depth positions that get logits, no more. The MASK
  // rows past the deepest drafted position only cost time: with the bundled drafter (trained on
  // blocks of 8 and 16) cutting them left τ unchanged (chain k = 3: 2.72 against 2.73 with 8
  // rows) and raised decode tokens/s by 9–36 % for k = 1 … 4 (`calibrate --drafter block`,
  // 12 held-out prompts; 2026-12-01).
  const int width = std::max(2, n_depth + 1);
  if (n - 1 + width > m_->n_pos()) return {};
  m_->draft_block(state_, ctx[static_cast<size_t>(n - 1)], n - 1, logits_, n_depth, width);
  const size_t nv = static_cast<size_t>(m_->config().n_vocab);
  for (float v : std::span<const float>(logits_).first(static_cast<size_t>(n_depth) * nv)) {
    if (!std::isfinite(v)) {
      throw GenerationError("non_finite_draft_logits",
                            "the DFlash drafter produced NaN or infinite logits (" + m_->path() + "): its weights are damaged");
    }
  }
  const bool tree = budget.mode != TreeMode::chain;
  for (int j = 0; j < n_depth; ++j) {
    const std::span<const float> row = std::span<const float>(logits_).subspan(static_cast<size_t>(j) * nv, nv);
    if (tree && params.greedy()) {
      top_k_softmax(row, std::max(1, budget.branch), q_[static_cast<size_t>(j)]);
    } else {
      process_logits(row, params, q_[static_cast<size_t>(j)], scratch_);
    }
  }
  RngChoices choices(rng);
  return tree_from_marginals(std::span<const Distribution>(q_).first(static_cast<size_t>(n_depth)), budget, max_nodes,
                             !params.greedy(), choices);
}

}  // namespace specchat
