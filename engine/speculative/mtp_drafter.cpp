#include "engine/speculative/mtp_drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/generator.h"
#include "engine/model.h"

namespace specchat {

namespace {

// Rows fed to the head per forward when observing (bounds the scratch for long prompts).
constexpr int kObserveChunk = 128;

// The k best (log-softmax of the raw logits, id) pairs, best first, ties to the lower id: the
// ranking dynamic trees expand by (as ModelDrafter's; any ranking keeps deterministic children
// lossless).
std::vector<std::pair<double, int32_t>> top_k_logprobs(std::span<const float> logits, int k) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const double lse = mx + std::log(sum);
  k = std::min<int>(k, static_cast<int>(logits.size()));
  std::vector<int32_t> best;
  if (k <= 0) return {};
  best.reserve(static_cast<size_t>(k) + 1);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (static_cast<int>(best.size()) == k && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int>(best.size()) > k) best.pop_back();
  }
  std::vector<std::pair<double, int32_t>> out;
  for (int32_t id : best) out.emplace_back(logits[static_cast<size_t>(id)] - lse, id);
  return out;
}

// The best n_keep nodes by cumulative log-probability (ties: earlier first, so the kept set is
// ancestor-closed), renumbered parents-first; children deterministic (the default).
DraftTree keep_best(const DraftTree& all, int n_keep) {
  std::vector<int32_t> order(all.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return all.nodes[static_cast<size_t>(a)].logp > all.nodes[static_cast<size_t>(b)].logp;
  });
  std::vector<uint8_t> keep(all.nodes.size(), 0);
  for (int i = 0; i < std::min<int>(n_keep, static_cast<int>(order.size())); ++i) {
    keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  }
  DraftTree out;
  std::vector<int32_t> remap(all.nodes.size(), -1);
  for (size_t i = 0; i < all.nodes.size(); ++i) {
    const DraftNode& nd = all.nodes[i];
    if (!keep[i] || (nd.parent >= 0 && remap[static_cast<size_t>(nd.parent)] < 0)) continue;
    remap[i] = out.add(nd.token, nd.parent < 0 ? -1 : remap[static_cast<size_t>(nd.parent)], nd.logp);
  }
  return out;
}

// Drops the temporary rows (slots past the context rows) when drafting ends, however it ends.
struct DropTemporaries {
  MtpState& st;
  int keep;
  ~DropTemporaries() { st.truncate(keep); }
};

}  // namespace

MtpDrafter::MtpDrafter(std::shared_ptr<const MtpModel> model, const LlamaModel& target, int seq)
    : model_(std::move(model)), tap_(target.config().n_layer - 1), seq_(seq) {
  if (!model_) throw std::invalid_argument("MtpDrafter: no model");
  if (model_->config().d_model != target.config().d_model || model_->config().n_vocab != target.config().n_vocab) {
    throw std::invalid_argument("MtpDrafter: the head " + model_->path() + " is not bound to " + target.path());
  }
}

void MtpDrafter::clear() {
  state_.truncate(0);
  toks_.clear();
  g_.clear();
}

void MtpDrafter::cut_to(std::span<const int32_t> ctx) {
  const size_t common = static_cast<size_t>(
      std::mismatch(toks_.begin(), toks_.end(), ctx.begin(), ctx.end()).first - toks_.begin());
  // Row i needs ctx[0, i + 1] unchanged; at most ctx.size() − 1 rows.
  const int keep = std::min({static_cast<int>(common) - 1, static_cast<int>(ctx.size()) - 1, state_.n});
  if (keep <= 0) {
    clear();
    return;
  }
  state_.truncate(keep);
  toks_.resize(static_cast<size_t>(keep) + 1);
  g_.resize(static_cast<size_t>(keep) * static_cast<size_t>(model_->config().d_model));
}

bool MtpDrafter::holds(std::span<const int32_t> ctx) const {
  return ctx.size() >= 2 && state_.n == static_cast<int>(ctx.size()) - 1 && toks_.size() == ctx.size() &&
         std::equal(toks_.begin(), toks_.end(), ctx.begin());
}

std::span<const float> MtpDrafter::row_output(int i) const {
  if (i < 0 || i >= state_.n) throw std::out_of_range("MtpDrafter::row_output: no row " + std::to_string(i));
  const size_t d = static_cast<size_t>(model_->config().d_model);
  return std::span<const float>(g_).subspan(static_cast<size_t>(i) * d, d);
}

void MtpDrafter::observe(int pos0, std::span<const int32_t> tokens, const HiddenRows& h) {
  const int n = h.n_rows;
  if (n <= 0) return;
  const MtpConfig& c = model_->config();
  if (pos0 != state_.n) {
    throw std::invalid_argument("MtpDrafter::observe: rows from position " + std::to_string(pos0) + ", but " +
                                std::to_string(state_.n) + " are held");
  }
  if (tokens.size() != static_cast<size_t>(n) + 1) {
    throw std::invalid_argument("MtpDrafter::observe: " + std::to_string(tokens.size()) + " tokens for " +
                                std::to_string(n) + " rows (want rows + 1)");
  }
  if (!toks_.empty() && tokens[0] != toks_.back()) {
    throw std::invalid_argument("MtpDrafter::observe: token at position " + std::to_string(pos0) +
                                " differs from the held context's (sync first)");
  }
  const int ti = h.index_of(tap_);
  if (ti < 0 || h.d_model != c.d_model || !h.data) {
    throw std::invalid_argument("MtpDrafter::observe: hidden rows lack layer " + std::to_string(tap_) + " of width " +
                                std::to_string(c.d_model));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= c.n_vocab) throw std::invalid_argument("MtpDrafter::observe: token id " + std::to_string(t) + " out of range");
  }
  const size_t d = static_cast<size_t>(c.d_model);
  std::vector<int32_t> pos;
  for (int r0 = 0; r0 < n; r0 += kObserveChunk) {
    const int m = std::min(kObserveChunk, n - r0);
    pos.resize(static_cast<size_t>(m));
    std::iota(pos.begin(), pos.end(), pos0 + r0);
    g_.resize((static_cast<size_t>(state_.n) + static_cast<size_t>(m)) * d);
    model_->forward(tokens.subspan(static_cast<size_t>(r0) + 1, static_cast<size_t>(m)), h.row(ti, r0), pos, 0,
                    nullptr, state_, g_.data() + static_cast<size_t>(state_.n) * d);
  }
  if (toks_.empty()) {
    toks_.assign(tokens.begin(), tokens.end());
  } else {
    toks_.insert(toks_.end(), tokens.begin() + 1, tokens.end());
  }
}

std::span<const float> MtpDrafter::head_logits(const float* g, int n) {
  const size_t nv = static_cast<size_t>(model_->config().n_vocab);
  if (logits_.size() < static_cast<size_t>(n) * nv) logits_.resize(static_cast<size_t>(n) * nv);
  model_->logits(g, n, logits_.data(), state_);
  const std::span<const float> out(logits_.data(), static_cast<size_t>(n) * nv);
  for (float v : out) {
    if (!std::isfinite(v)) {
      throw GenerationError("non_finite_draft_logits", "the MTP head produced NaN or infinite logits (" +
                                                           model_->path() + "): its weights are damaged");
    }
  }
  return out;
}

DraftTree MtpDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                              const SamplingParams& params, Rng& rng) {
  cut_to(ctx);
  if (!holds(ctx) || max_nodes <= 0 || budget.node_budget <= 0) return {};
  max_nodes = std::min(max_nodes, budget.node_budget);
  switch (budget.mode) {
    case TreeMode::chain: {
      RngChoices draws(rng);
      return propose_chain(ctx, max_nodes, params, draws);
    }
    case TreeMode::dynamic: return propose_dynamic(ctx, budget, max_nodes);
    case TreeMode::optimal: return propose_static(ctx, budget, max_nodes);
  }
  return {};
}

DraftTree MtpDrafter::propose_chain(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                                    Choices& draws) {
  if (!holds(ctx) || k <= 0) return {};
  const int n = static_cast<int>(ctx.size());
  const size_t d = static_cast<size_t>(model_->config().d_model);
  DropTemporaries drop{state_, state_.n};
  std::vector<float>& gcur = gcur_;
  std::vector<float>& gnext = gnext_;
  gcur.assign(row_output(n - 2).begin(), row_output(n - 2).end());
  gnext.resize(d);
  std::span<const float> logits = head_logits(gcur.data(), 1);
  std::vector<int32_t> toks;
  std::vector<Distribution> qs;
  for (int i = 0; i < k; ++i) {
    Distribution q = process_logits(logits, params);
    const int32_t t = params.greedy() ? q.ids[0] : draws.draw(q);
    toks.push_back(t);
    qs.push_back(std::move(q));
    if (i + 1 == k) break;
    // The temporary row of the token just drafted (position n − 1 + i; in a chain every earlier
    // temporary row is an ancestor, so the causal mask is the tree mask).
    const int32_t tok[1] = {t}, pos[1] = {n - 1 + i};
    model_->forward(tok, gcur.data(), pos, 0, nullptr, state_, gnext.data());
    std::swap(gcur, gnext);
    logits = head_logits(gcur.data(), 1);
  }
  return DraftTree::chain(toks, std::move(qs),
                          params.greedy() ? ChildSampling::deterministic : ChildSampling::with_replacement);
}

std::span<const float> MtpDrafter::feed_nodes(const DraftTree& t, std::span<const int32_t> nodes, int n) {
  const size_t d = static_cast<size_t>(model_->config().d_model), L = nodes.size();
  const int base = n - 1;  // context rows: slots [0, base)
  node_slot_.resize(t.nodes.size(), -1);
  if (node_g_.size() < t.nodes.size() * d) node_g_.resize(t.nodes.size() * d);
  h_.resize(L * d);
  gout_.resize(L * d);
  std::vector<int32_t>& toks = feed_toks_;
  std::vector<int32_t>& pos = feed_pos_;
  toks.resize(L);
  pos.resize(L);
  const int kv_pos0 = state_.n, n_masked = kv_pos0 + static_cast<int>(L) - base;
  mask_.assign(L * static_cast<size_t>(n_masked), 0);
  for (size_t r = 0; r < L; ++r) {
    const DraftNode& nd = t.nodes[static_cast<size_t>(nodes[r])];
    toks[r] = nd.token;
    pos[r] = n - 2 + nd.depth;
    const float* hp = nd.parent < 0 ? g_.data() + static_cast<size_t>(n - 2) * d
                                    : node_g_.data() + static_cast<size_t>(nd.parent) * d;
    std::copy(hp, hp + d, h_.begin() + static_cast<std::ptrdiff_t>(r * d));
    uint8_t* row = mask_.data() + r * static_cast<size_t>(n_masked);
    row[kv_pos0 - base + static_cast<int>(r)] = 1;  // itself
    for (int32_t a = nd.parent; a >= 0; a = t.nodes[static_cast<size_t>(a)].parent) {
      const int32_t s = node_slot_[static_cast<size_t>(a)];
      if (s < 0) throw std::logic_error("MtpDrafter: a tree node fed before its parent");
      row[s - base] = 1;
    }
  }
  model_->forward(toks, h_.data(), pos, base, mask_.data(), state_, gout_.data());
  for (size_t r = 0; r < L; ++r) {
    node_slot_[static_cast<size_t>(nodes[r])] = kv_pos0 + static_cast<int>(r);
    std::copy(gout_.begin() + static_cast<std::ptrdiff_t>(r * d), gout_.begin() + static_cast<std::ptrdiff_t>((r + 1) * d),
              node_g_.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(nodes[r]) * d));
  }
  return head_logits(gout_.data(), static_cast<int>(L));
}

DraftTree MtpDrafter::propose_dynamic(std::span<const int32_t> ctx, const TreeBudget& b, int max_nodes) {
  const int n = static_cast<int>(ctx.size());
  const int K = std::max(1, b.branch), D = std::max(1, b.depth);
  const size_t nv = static_cast<size_t>(model_->config().n_vocab);
  DropTemporaries drop{state_, state_.n};
  node_slot_.clear();
  DraftTree all;
  for (const auto& [lp, tok] : top_k_logprobs(head_logits(row_output(n - 2).data(), 1), K)) all.add(tok, -1, lp);
  std::vector<int32_t> level(all.nodes.size());
  std::iota(level.begin(), level.end(), 0);
  for (int dd = 2; dd <= D && !level.empty(); ++dd) {
    // Expand the top-K nodes of the newest level by cumulative log-probability (EAGLE-2 §4.1).
    std::stable_sort(level.begin(), level.end(), [&](int32_t a, int32_t c) {
      return all.nodes[static_cast<size_t>(a)].logp > all.nodes[static_cast<size_t>(c)].logp;
    });
    if (static_cast<int>(level.size()) > K) level.resize(static_cast<size_t>(K));
    const std::span<const float> logits = feed_nodes(all, level, n);
    std::vector<int32_t> next;
    for (size_t r = 0; r < level.size(); ++r) {
      const int32_t v = level[r];
      const double base = all.nodes[static_cast<size_t>(v)].logp;
      for (const auto& [lp, tok] : top_k_logprobs(logits.subspan(r * nv, nv), K)) next.push_back(all.add(tok, v, base + lp));
    }
    level = std::move(next);
  }
  return keep_best(all, max_nodes);
}

DraftTree MtpDrafter::propose_static(std::span<const int32_t> ctx, const TreeBudget& b, int max_nodes) {
  const int n = static_cast<int>(ctx.size());
  const int n_shape = std::min<int>(max_nodes, static_cast<int>(std::min(b.shape_parent.size(), b.shape_rank.size())));
  if (n_shape <= 0) return {};
  const size_t nv = static_cast<size_t>(model_->config().n_vocab);
  DropTemporaries drop{state_, state_.n};
  node_slot_.clear();
  // Shape node i: depth from its parent (parents first, as SequoiaPlanner builds shapes).
  std::vector<int32_t> depth(static_cast<size_t>(n_shape), 1), made(static_cast<size_t>(n_shape), -1);
  int max_rank = 0, max_depth = 1;
  for (int i = 0; i < n_shape; ++i) {
    const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
    if (sp >= i) throw std::invalid_argument("MtpDrafter: a tree shape lists a child before its parent");
    if (sp >= 0) depth[static_cast<size_t>(i)] = depth[static_cast<size_t>(sp)] + 1;
    max_rank = std::max(max_rank, b.shape_rank[static_cast<size_t>(i)] + 1);
    max_depth = std::max(max_depth, depth[static_cast<size_t>(i)]);
  }
  DraftTree t;
  // Ranked candidates per tree slot (0 = root, v + 1 = node v): the parent's top max_rank.
  std::vector<std::vector<std::pair<double, int32_t>>> ranked(1);
  ranked[0] = top_k_logprobs(head_logits(row_output(n - 2).data(), 1), max_rank);
  for (int dd = 1; dd <= max_depth; ++dd) {
    if (dd > 1) {
      // Feed the nodes of depth dd − 1 that have children in the shape, in one batch.
      std::vector<int32_t> parents;
      for (int i = 0; i < n_shape; ++i) {
        const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
        if (depth[static_cast<size_t>(i)] != dd || sp < 0 || made[static_cast<size_t>(sp)] < 0) continue;
        if (std::find(parents.begin(), parents.end(), made[static_cast<size_t>(sp)]) == parents.end()) {
          parents.push_back(made[static_cast<size_t>(sp)]);
        }
      }
      if (parents.empty()) break;
      ranked.resize(t.nodes.size() + 1);
      const std::span<const float> logits = feed_nodes(t, parents, n);
      for (size_t r = 0; r < parents.size(); ++r) {
        ranked[static_cast<size_t>(parents[r]) + 1] = top_k_logprobs(logits.subspan(r * nv, nv), max_rank);
      }
    }
    for (int i = 0; i < n_shape; ++i) {
      if (depth[static_cast<size_t>(i)] != dd) continue;
      const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
      const int32_t parent = sp < 0 ? -1 : made[static_cast<size_t>(sp)];
      if (sp >= 0 && parent < 0) continue;  // its parent was cut
      const auto& cand = ranked[static_cast<size_t>(parent + 1)];
      const int rank = b.shape_rank[static_cast<size_t>(i)];
      if (rank < 0 || rank >= static_cast<int>(cand.size())) continue;
      const double base = parent < 0 ? 0.0 : t.nodes[static_cast<size_t>(parent)].logp;
      made[static_cast<size_t>(i)] =
          t.add(cand[static_cast<size_t>(rank)].second, parent, base + cand[static_cast<size_t>(rank)].first);
    }
  }
  return t;
}

std::vector<float> MtpDrafter::tree_logits(std::span<const int32_t> ctx, const DraftTree& tree) {
  cut_to(ctx);
  if (!holds(ctx)) return {};
  tree.validate();
  const int n = static_cast<int>(ctx.size());
  const size_t nv = static_cast<size_t>(model_->config().n_vocab);
  DropTemporaries drop{state_, state_.n};
  node_slot_.clear();
  std::vector<float> out(tree.nodes.size() * nv);
  for (int dd = 1; dd <= tree.depth(); ++dd) {
    std::vector<int32_t> level;
    for (int32_t i = 0; i < tree.size(); ++i) {
      if (tree.nodes[static_cast<size_t>(i)].depth == dd) level.push_back(i);
    }
    const std::span<const float> logits = feed_nodes(tree, level, n);
    for (size_t r = 0; r < level.size(); ++r) {
      std::copy(logits.begin() + static_cast<std::ptrdiff_t>(r * nv), logits.begin() + static_cast<std::ptrdiff_t>((r + 1) * nv),
                out.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(level[r]) * nv));
    }
  }
  return out;
}

std::vector<float> MtpDrafter::logits_after(std::span<const int32_t> ctx, std::span<const int32_t> path) {
  cut_to(ctx);
  if (!holds(ctx)) return {};
  const int n = static_cast<int>(ctx.size());
  const size_t d = static_cast<size_t>(model_->config().d_model);
  DropTemporaries drop{state_, state_.n};
  std::vector<float>& gcur = gcur_;
  std::vector<float>& gnext = gnext_;
  gcur.assign(row_output(n - 2).begin(), row_output(n - 2).end());
  gnext.resize(d);
  for (size_t i = 0; i < path.size(); ++i) {
    const int32_t pos[1] = {n - 1 + static_cast<int>(i)};
    model_->forward(path.subspan(i, 1), gcur.data(), pos, 0, nullptr, state_, gnext.data());
    std::swap(gcur, gnext);
  }
  const std::span<const float> l = head_logits(gcur.data(), 1);
  return std::vector<float>(l.begin(), l.end());
}

}  // namespace specchat
