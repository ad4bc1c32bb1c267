#include "engine/speculative/mtp_drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "engine/generator.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/speculative/tree_builder.h"

namespace specchat {

namespace {

// Rows fed to the head per forward when observing (bounds the scratch for long prompts).
constexpr int kObserveChunk = 128;

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
  if (!all_finite(out)) {
    throw GenerationError("non_finite_draft_logits", "the MTP head produced NaN or infinite logits (" +
                                                         model_->path() + "): its weights are damaged");
  }
  return out;
}

// The head as a NodeSource: the root's row is the last context row's logits; other slots'
// nodes get temporary rows in one tree-masked batch (feed_nodes).
class MtpDrafter::Nodes final : public LogitsSource {
 public:
  Nodes(MtpDrafter& d, int n) : d_(d), n_(n) {}
  void score(const DraftTree& t, std::span<const int32_t> slots) override {
    const size_t nv = static_cast<size_t>(d_.model_->config().n_vocab);
    if (slots.size() == 1 && slots[0] == 0) {
      set_rows(d_.head_logits(d_.row_output(n_ - 2).data(), 1), nv, nv);
      return;
    }
    nodes_.clear();
    for (int32_t s : slots) nodes_.push_back(s - 1);
    set_rows(d_.feed_nodes(t, nodes_, n_), nv, nv);
  }

 private:
  MtpDrafter& d_;
  int n_;
  std::vector<int32_t> nodes_;
};

DraftTree MtpDrafter::build(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                            const SamplingParams& params, Choices& draws) {
  cut_to(ctx);
  if (!holds(ctx) || max_nodes <= 0 || budget.node_budget <= 0) return {};
  DropTemporaries drop{state_, state_.n};
  node_slot_.clear();
  Nodes src(*this, static_cast<int>(ctx.size()));
  return build_tree(src, budget, max_nodes, params, draws);
}

DraftTree MtpDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                              const SamplingParams& params, Rng& rng) {
  RngChoices draws(rng);
  return build(ctx, budget, max_nodes, params, draws);
}

DraftTree MtpDrafter::propose_chain(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                                    Choices& draws) {
  TreeBudget b;
  b.mode = TreeMode::chain;
  b.node_budget = k;
  b.depth = k;
  return build(ctx, b, k, params, draws);
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
