#include "engine/speculative/drafter.h"

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

const char* tree_mode_name(TreeMode m) {
  switch (m) {
    case TreeMode::chain: return "chain";
    case TreeMode::dynamic: return "dynamic";
    case TreeMode::optimal: return "optimal";
  }
  return "unknown";
}

namespace {

// A damaged draft (NaN/inf weights) would make q NaN, and min(1, p/NaN) accepts every draft:
// sampled output would silently stop following the target. Draft logits are checked like the
// target's (engine/runtime/engine.cpp) and refused with a typed error.
std::span<const float> checked(std::span<const float> logits, const LlamaModel& m) {
  if (!all_finite(logits)) {
    throw GenerationError("non_finite_draft_logits", "the draft model produced NaN or infinite logits (" + m.path() +
                                                         "): its weights are damaged");
  }
  return logits;
}

}  // namespace

ModelDrafter::ModelDrafter(LlamaModel& model, int seq, int target_vocab) : m_(model), seq_(seq) {
  const int nv = model.config().n_vocab;
  n_shared_ = static_cast<size_t>(target_vocab > 0 ? std::min(nv, target_vocab) : nv);
  map_inputs_ = target_vocab > nv;
}

std::span<const int32_t> ModelDrafter::draft_ids(std::span<const int32_t> ctx) {
  if (!map_inputs_) return ctx;
  const int32_t nv = m_.config().n_vocab;
  mapped_.assign(ctx.begin(), ctx.end());
  for (int32_t& t : mapped_) {
    if (t >= nv) t = m_.vocab().unk_id;
  }
  return mapped_;
}

void ModelDrafter::sync(std::span<const int32_t> ctx) {
  // Prefill all but the last token (propose feeds the last one for its logits).
  const int n = static_cast<int>(ctx.size());
  if (n >= 2 && n <= m_.n_ctx()) m_.sync_cache(draft_ids(ctx), n - 1, false, seq_);
}

void ModelDrafter::accepted(const DraftTree& tree, std::span<const int32_t> path) {
  KvCache& kv = m_.kv(seq_);
  if (fed_base_ < 0 || fed_base_ != kv.size() || fed_slot_.size() != tree.nodes.size()) return;
  std::vector<int32_t> rel, ids;
  for (int32_t v : path) {
    const int32_t slot = fed_slot_[static_cast<size_t>(v)];
    if (slot < 0) break;  // a leaf that was never fed: the next step feeds it
    rel.push_back(slot - fed_base_);
    ids.push_back(tree.nodes[static_cast<size_t>(v)].token);
  }
  fed_base_ = -1;
  if (!rel.empty()) kv.keep_path(rel, ids);
}

void ModelDrafter::finished(std::span<const int32_t> ctx) {
  KvCache& kv = m_.kv(seq_);
  kv.truncate(kv.common_prefix(draft_ids(ctx)));
  fed_base_ = -1;
}

void ModelDrafter::clear() {
  m_.kv(seq_).truncate(0);
  fed_base_ = -1;
}

// The tree in progress: a TreeBuilder whose rounds are this drafter's draft forwards. The
// root round feeds the context's tail (the tokens the draft's cache lacks, the last one always,
// for its logits) and commits it; later rounds feed the wanted nodes in one tree-masked batch
// at the slots after the context (each row sees the context, its ancestors and itself).
class ModelDrafter::Nodes final : public LogitsSource {
 public:
  Nodes(ModelDrafter& d, std::span<const int32_t> ctx, const TreeBudget& b, int max_nodes, const SamplingParams& p,
        Rng& rng)
      : d_(d), builder_(b, max_nodes, p), choices_(rng), ctx_(ctx.begin(), ctx.end()),
        n_(static_cast<int>(ctx.size())), next_slot_(n_) {}

  // Rows were set by take_round (the rounds run outside build_tree).
  void score(const DraftTree&, std::span<const int32_t>) override {}
  int room() const override { return d_.m_.n_ctx() - next_slot_; }

  const Batch* round_batch() {
    const std::vector<int32_t>& want = builder_.wanted();
    if (want.empty()) return nullptr;
    batch_ = Batch{};
    batch_.seq = d_.seq_;
    if (root_) {
      // Keep the cached prefix (at most n − 1: the last token is fed for its logits).
      KvCache& kv = d_.m_.kv(d_.seq_);
      int keep = std::min(kv.common_prefix(ctx_), n_ - 1);
      if (n_ - keep > d_.m_.max_batch()) {
        // A long catch-up (rare: sync() prefilled the prompt) runs alone, in chunks.
        d_.m_.sync_cache(ctx_, n_ - 1, false, d_.seq_);
        keep = n_ - 1;
      }
      kv.truncate(keep);
      root_keep_ = keep;
      batch_ = Batch::chain(std::span<const int32_t>(ctx_).subspan(static_cast<size_t>(keep)), keep, false);
      batch_.seq = d_.seq_;
      return &batch_;
    }
    const DraftTree& t = builder_.tree();
    slot_.resize(t.nodes.size(), -1);
    batch_.kv_pos0 = next_slot_;
    batch_.n_prefix = n_;
    for (int32_t s : want) {
      const DraftNode& nd = t.nodes[static_cast<size_t>(s - 1)];
      batch_.tokens.push_back(nd.token);
      batch_.pos.push_back(n_ - 1 + nd.depth);
      batch_.parent.push_back(-1);
      batch_.parent_slot.push_back(nd.parent < 0 ? -1 : slot_[static_cast<size_t>(nd.parent)]);
      batch_.out_rows.push_back(static_cast<int32_t>(batch_.out_rows.size()));
    }
    for (size_t i = 0; i < want.size(); ++i) slot_[static_cast<size_t>(want[i] - 1)] = next_slot_ + static_cast<int>(i);
    next_slot_ += static_cast<int>(want.size());
    return &batch_;
  }

  void take_round(std::span<const float> logits) {
    checked(logits, d_.m_);
    const size_t nv = static_cast<size_t>(d_.m_.config().n_vocab);
    if (logits.size() != builder_.wanted().size() * nv) {
      throw std::logic_error("ModelDrafter::take_round: " + std::to_string(logits.size() / std::max<size_t>(nv, 1)) +
                             " rows for " + std::to_string(builder_.wanted().size()) + " wanted");
    }
    set_rows(logits, nv, d_.n_shared_);
    if (root_) {
      d_.m_.kv(d_.seq_).commit(std::span<const int32_t>(ctx_).subspan(static_cast<size_t>(root_keep_)));
      root_ = false;
    }
    builder_.advance(*this, choices_);
  }

  DraftTree finish() {
    std::vector<int32_t> from;
    DraftTree t = builder_.finish(&from);
    // Tree rows stay in the cache past the context until accepted() keeps the accepted path's.
    if (!root_) d_.m_.kv(d_.seq_).truncate(n_);
    slot_.resize(std::max(slot_.size(), from.size()), -1);
    d_.fed_slot_.clear();
    for (int32_t f : from) d_.fed_slot_.push_back(static_cast<size_t>(f) < slot_.size() ? slot_[static_cast<size_t>(f)] : -1);
    d_.fed_base_ = root_ ? -1 : n_;
    return t;
  }

 private:
  ModelDrafter& d_;
  TreeBuilder builder_;
  RngChoices choices_;
  std::vector<int32_t> ctx_;   // the context in the draft's ids
  int n_;
  int next_slot_;              // the draft slot the next tree row is fed at
  std::vector<int32_t> slot_;  // per node of builder_.tree(): its draft slot once fed, −1 before
  Batch batch_;
  bool root_ = true;           // the next round is the root's
  int root_keep_ = 0;          // the root round feeds ctx_[root_keep_, n_)
};

ModelDrafter::~ModelDrafter() = default;

bool ModelDrafter::begin_tree(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                              const SamplingParams& params, Rng& rng) {
  fed_base_ = -1;
  nodes_.reset();
  const int n = static_cast<int>(ctx.size());
  if (n == 0 || n >= m_.n_ctx() || max_nodes <= 0 || budget.node_budget <= 0) return false;
  // Tree nodes occupy draft slots n .. n + nodes − 1 while drafting.
  max_nodes = std::min({max_nodes, budget.node_budget, m_.n_ctx() - n});
  nodes_ = std::make_unique<Nodes>(*this, draft_ids(ctx), budget, max_nodes, params, rng);
  return true;
}

const Batch* ModelDrafter::round_batch() { return nodes_ ? nodes_->round_batch() : nullptr; }

void ModelDrafter::take_round(std::span<const float> logits) {
  if (!nodes_) throw std::logic_error("ModelDrafter::take_round: no tree in progress");
  nodes_->take_round(logits);
}

DraftTree ModelDrafter::end_tree() {
  if (!nodes_) return {};
  DraftTree t = nodes_->finish();
  nodes_.reset();
  return t;
}

DraftTree ModelDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                                const SamplingParams& params, Rng& rng) {
  if (!begin_tree(ctx, budget, max_nodes, params, rng)) return {};
  try {
    while (const Batch* b = round_batch()) take_round(m_.forward(*b));
  } catch (...) {
    nodes_.reset();
    throw;
  }
  return end_tree();
}

}  // namespace specchat
