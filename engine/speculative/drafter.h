// Drafters propose a draft tree for the target to verify in one forward.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculative/draft_tree.h"

namespace specchat {

class LlamaModel;
struct Batch;

// Hidden states of some rows of one target forward, for drafters that read them
// (docs/design/target-feature-drafters.md). Row r of tap t is
// data[t * tap_stride + r * d_model … + d_model) (floats). Taps are engine hidden-layer ids
// (il = the residual stream after target layer il; kHiddenFinalNorm = the final norm's output),
// in data's order. Valid only during the call it is passed to.
struct HiddenRows {
  std::span<const int32_t> taps;  // [n_taps]
  const float* data = nullptr;    // [n_taps, n_rows, d_model] with the strides below
  size_t tap_stride = 0;          // floats between taps
  int n_rows = 0;
  int d_model = 0;
  const float* row(int tap_index, int r) const {
    return data + static_cast<size_t>(tap_index) * tap_stride + static_cast<size_t>(r) * static_cast<size_t>(d_model);
  }
  // Index of layer `layer` in taps, −1 when absent.
  int index_of(int32_t layer) const {
    for (size_t i = 0; i < taps.size(); ++i) {
      if (taps[i] == layer) return static_cast<int>(i);
    }
    return -1;
  }
};

// Tree shape a step may use (node budget N = nodes sent to the target, not counting the root).
enum class TreeMode { chain, dynamic, optimal };
const char* tree_mode_name(TreeMode m);

struct TreeBudget {
  TreeMode mode = TreeMode::chain;
  int node_budget = 4;  // N: at most this many nodes
  int depth = 4;        // D: at most this deep (a chain has depth == node_budget)
  int branch = 1;       // K: children expanded per node (dynamic)
  // Static tree shape for TreeMode::optimal: for node i (parents first), its parent index
  // (−1 = root) and the rank (0 = most likely) of its token among the parent's draft
  // distribution. Built by SequoiaPlanner.
  std::vector<int32_t> shape_parent, shape_rank;
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Brings internal state in line with the committed context (e.g. prefills a draft model's
  // KV cache). Optional; propose() must work without it.
  virtual void sync(std::span<const int32_t> /*ctx*/) {}
  // Proposes a tree continuing ctx ([n] committed tokens) within `budget` and with at most
  // `max_nodes` nodes (room left in the context). Draws with the same processed sampling as the
  // target (params), from rng. An empty tree is a legal outcome (B14).
  virtual DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                            const SamplingParams& params, Rng& rng) = 0;
  // Told which nodes of the last proposed tree the target accepted (root child first), so a
  // drafter with a KV cache can keep their rows instead of recomputing them. Optional.
  virtual void accepted(const DraftTree& /*tree*/, std::span<const int32_t> /*path*/) {}
  // The request ended with `ctx` ([n] tokens: prompt + kept reply) committed: keep only state
  // consistent with it (a draft model's cache keeps its common prefix, for the next turn).
  virtual void finished(std::span<const int32_t> /*ctx*/) {}
  // Forget all cached state (cold runs).
  virtual void clear() {}

  // --- Drafters that read the target's hidden states (DFlash block drafter, MTP head) ------
  // Invariant: such a drafter holds one context row per committed token except the last
  // (docs/design/target-feature-drafters.md). The engine asks the target forwards for
  // target_taps() and hands over the rows of committed tokens with observe().
  //
  // Target hidden layers this drafter reads (engine ids, see HiddenRows). Empty: none (the
  // engine then never asks for hidden states on its behalf).
  virtual std::vector<int32_t> target_taps() const { return {}; }
  // Committed tokens whose context rows the drafter holds: rows for ctx[0, n_observed()).
  // sync(ctx) first cuts this to the prefix shared with ctx (at most ctx.size() − 1).
  virtual int n_observed() const { return 0; }
  // Appends context rows for committed tokens ctx[pos0, pos0 + n), n = h.n_rows; pos0 must
  // equal n_observed(). `tokens` is ctx[pos0, pos0 + n + 1): the n tokens and their successor
  // (MTP pairs each row with the next token; the engine always knows it). h holds the target
  // hidden states of the n tokens, one row each, in order, for at least target_taps().
  // std::invalid_argument on a gap (pos0 != n_observed()) or a size mismatch.
  virtual void observe(int /*pos0*/, std::span<const int32_t> /*tokens*/, const HiddenRows& /*h*/) {}
};

// A small llama model drafting autoregressively (Leviathan et al. 2023) in any shape of
// TreeBuilder (engine/speculative/tree_builder.h): a chain, a dynamic tree (EAGLE-2) or a static
// optimal tree (Sequoia). It drafts in sequence `seq` of the draft model's KV pool, whose cache
// keeps the longest prefix it shares with each new context. A tree's nodes are fed in
// tree-masked rounds at the slots after the committed context; accepted() keeps the accepted
// path's rows (as the target's cache does), so the next step re-feeds nothing it already has.
//
// The rounds of several sequences' drafters can share one draft forward (Engine::step):
// begin_tree(), then while round_batch() gives a batch, forward it (with the other drafters'
// batches) and hand the rows to take_round(); end_tree() returns the tree. propose() is the
// same for one drafter alone.
class ModelDrafter : public Drafter {
 public:
  // target_vocab: the target's vocabulary size when it differs from the draft's by trailing
  // padding entries (vocab.h, check_draft_vocab; 0 = the same as the draft's). The draft then
  // proposes only ids below both sizes, and reads its unknown token for a context id it lacks.
  explicit ModelDrafter(LlamaModel& model, int seq = 0, int target_vocab = 0);
  ~ModelDrafter() override;
  void sync(std::span<const int32_t> ctx) override;
  DraftTree propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                    const SamplingParams& params, Rng& rng) override;
  // Compacts the accepted path's rows (those the tree rounds fed) into place after the
  // committed context and commits them, as the target's cache does (KvCache::keep_path).
  void accepted(const DraftTree& tree, std::span<const int32_t> path) override;
  void finished(std::span<const int32_t> ctx) override;
  void clear() override;

  // --- Rounds, for drafting several sequences in one draft forward (see above) ---------------
  // Starts a tree continuing ctx (propose's arguments; `rng` must outlive the tree). Returns
  // false when nothing can be drafted (empty tree; no rounds).
  bool begin_tree(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes, const SamplingParams& params,
                  Rng& rng);
  // The next round's rows for the draft model (seq = this drafter's sequence; logits for every
  // row listed in out_rows), or null when the tree is complete. Valid until take_round().
  const Batch* round_batch();
  // The logits of round_batch()'s out rows ([rows, n_vocab] of the draft), after the forward
  // that ran it. GenerationError("non_finite_draft_logits") for NaN/inf logits.
  void take_round(std::span<const float> logits);
  // The finished tree (after round_batch() returned null).
  DraftTree end_tree();
  LlamaModel& model() { return m_; }

 private:
  class Nodes;  // the NodeSource over this drafter's rounds
  // ctx with ids the draft lacks replaced by its unknown token (ctx itself when none can occur).
  std::span<const int32_t> draft_ids(std::span<const int32_t> ctx);
  LlamaModel& m_;
  int seq_;
  size_t n_shared_;             // ids the draft may propose: [0, min(draft, target vocab))
  bool map_inputs_ = false;     // the target's vocabulary is larger than the draft's
  std::vector<int32_t> mapped_;  // draft_ids' buffer
  // Draft-cache slot of each node of the last tree (−1 = never fed), and the committed length
  // the tree was drafted after (−1 = nothing to compact).
  std::vector<int32_t> fed_slot_;
  int fed_base_ = -1;
  std::unique_ptr<Nodes> nodes_;  // the tree in progress (begin_tree … end_tree)
};

}  // namespace specchat
