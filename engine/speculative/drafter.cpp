#include "engine/speculative/drafter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/generator.h"
#include "engine/model.h"

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
  for (float v : logits) {
    if (!std::isfinite(v)) {
      throw GenerationError("non_finite_draft_logits", "the draft model produced NaN or infinite logits (" + m.path() +
                                                           "): its weights are damaged");
    }
  }
  return logits;
}

// Plain softmax (T = 1) of draft logits: the ranking that dynamic/static trees expand by.
// Children chosen as a fixed function of it are deterministic (q one-hot in acceptance), so
// any ranking keeps the output lossless; this one tracks the draft's own confidence.
std::vector<std::pair<double, int32_t>> top_k_logprobs(std::span<const float> logits, int k) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - mx));
  const double lse = mx + std::log(sum);
  k = std::min<int>(k, static_cast<int>(logits.size()));
  if (k <= 0) return {};
  // One pass keeping the k best (logit descending, lower id first on ties) in a small sorted
  // array: k is a tree's branching factor or a Sequoia rank (a handful), so this beats sorting
  // an index array over the whole vocabulary for every expanded node.
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(k) + 1);
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    if (static_cast<int>(best.size()) == k && !better(id, best.back())) continue;
    auto at = std::upper_bound(best.begin(), best.end(), id, better);
    best.insert(at, id);
    if (static_cast<int>(best.size()) > k) best.pop_back();
  }
  std::vector<std::pair<double, int32_t>> out;
  out.reserve(best.size());
  for (int32_t id : best) out.emplace_back(logits[static_cast<size_t>(id)] - lse, id);
  return out;
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

std::span<const float> ModelDrafter::feed_context(std::span<const int32_t> ctx) {
  const std::span<const int32_t> in = draft_ids(ctx);
  return checked(m_.sync_cache(in, static_cast<int>(in.size()), true, seq_), m_).first(n_shared_);
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

DraftTree ModelDrafter::propose(std::span<const int32_t> ctx, const TreeBudget& budget, int max_nodes,
                                const SamplingParams& params, Rng& rng) {
  fed_base_ = -1;
  const int n = static_cast<int>(ctx.size());
  if (n == 0 || n >= m_.n_ctx() || max_nodes <= 0 || budget.node_budget <= 0) return {};
  // Tree nodes occupy draft slots n .. n + nodes - 1 while drafting.
  max_nodes = std::min({max_nodes, budget.node_budget, m_.n_ctx() - n});
  switch (budget.mode) {
    case TreeMode::chain: return propose_chain(ctx, max_nodes, params, rng);
    case TreeMode::dynamic: return propose_dynamic(ctx, budget, max_nodes, params);
    case TreeMode::optimal: return propose_static(ctx, budget, max_nodes, params);
  }
  return {};
}

DraftTree ModelDrafter::propose_chain(std::span<const int32_t> ctx, int k, const SamplingParams& params,
                                      Rng& rng) {
  const int n = static_cast<int>(ctx.size());
  std::span<const float> logits = feed_context(ctx);
  std::vector<int32_t> toks;
  std::vector<Distribution> qs;
  for (int i = 0; i < k; ++i) {
    Distribution q = process_logits(logits, params);
    const int32_t t = params.greedy() ? q.ids[0] : q.sample(rng);
    toks.push_back(t);
    qs.push_back(std::move(q));
    if (i + 1 == k) break;
    // Committed to the draft's cache: accepted drafts are reused by the next step.
    const int32_t one[1] = {t};
    Batch b = Batch::chain(one, n + i, false);
    b.seq = seq_;
    logits = checked(m_.forward(b), m_).first(n_shared_);
    m_.kv(seq_).commit(one);
  }
  // Greedy drafts are the argmax (q one-hot); sampled drafts were drawn from q.
  return DraftTree::chain(toks, std::move(qs),
                          params.greedy() ? ChildSampling::deterministic : ChildSampling::with_replacement);
}

namespace {

// Expands nodes of a tree being drafted: feeds them to the draft model in one tree-masked
// forward (each sees the context, its ancestors and itself) and returns their logits.
struct TreeFeeder {
  LlamaModel& m;
  int seq;                      // the sequence (draft KV pool slot) drafting
  int n;                        // committed context length: slots [0, n) are shared
  std::vector<int32_t> slot;    // per tree node: its draft slot once fed, −1 before
  int next_slot;

  std::span<const float> feed(const DraftTree& t, const std::vector<int32_t>& nodes) {
    Batch b;
    b.seq = seq;
    b.kv_pos0 = next_slot;
    b.n_prefix = n;
    for (int32_t v : nodes) {
      const DraftNode& nd = t.nodes[static_cast<size_t>(v)];
      b.tokens.push_back(nd.token);
      b.pos.push_back(n - 1 + nd.depth);
      b.parent.push_back(-1);
      b.parent_slot.push_back(nd.parent < 0 ? -1 : slot[static_cast<size_t>(nd.parent)]);
      b.out_rows.push_back(static_cast<int32_t>(b.out_rows.size()));
    }
    for (size_t i = 0; i < nodes.size(); ++i) slot[static_cast<size_t>(nodes[i])] = next_slot + static_cast<int>(i);
    next_slot += static_cast<int>(nodes.size());
    return checked(m.forward(b), m);
  }
};

// Keeps the best `n_keep` nodes by cumulative log-probability (ties: earlier node first, so a
// parent always precedes its children and the kept set is ancestor-closed) and renumbers them;
// `slots` (per node of `all`) becomes per node of the result.
DraftTree keep_best(const DraftTree& all, int n_keep, std::vector<int32_t>& slots) {
  std::vector<int32_t> order(all.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return all.nodes[static_cast<size_t>(a)].logp > all.nodes[static_cast<size_t>(b)].logp;
  });
  std::vector<uint8_t> keep(all.nodes.size(), 0);
  for (int i = 0; i < std::min<int>(n_keep, static_cast<int>(order.size())); ++i) keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  DraftTree out;
  std::vector<int32_t> remap(all.nodes.size(), -1), kept_slots;
  slots.resize(all.nodes.size(), -1);
  for (size_t i = 0; i < all.nodes.size(); ++i) {
    const DraftNode& nd = all.nodes[i];
    if (!keep[i] || (nd.parent >= 0 && remap[static_cast<size_t>(nd.parent)] < 0)) continue;
    remap[i] = out.add(nd.token, nd.parent < 0 ? -1 : remap[static_cast<size_t>(nd.parent)], nd.logp);
    kept_slots.push_back(slots[i]);
  }
  slots = std::move(kept_slots);
  return out;  // every slot's children are deterministic (the default)
}

}  // namespace

DraftTree ModelDrafter::propose_dynamic(std::span<const int32_t> ctx, const TreeBudget& b, int max_nodes,
                                        const SamplingParams& /*params*/) {
  const int n = static_cast<int>(ctx.size());
  const int K = std::max(1, b.branch), D = std::max(1, b.depth);
  // Every expanded node needs a draft slot; bound the expansion by the room left.
  const int room = m_.n_ctx() - n;
  DraftTree all;
  for (const auto& [lp, tok] : top_k_logprobs(feed_context(ctx), K)) all.add(tok, -1, lp);
  TreeFeeder f{m_, seq_, n, std::vector<int32_t>(), n};
  std::vector<int32_t> level(all.nodes.size());
  std::iota(level.begin(), level.end(), 0);
  for (int d = 2; d <= D && !level.empty(); ++d) {
    // Expand the top-K nodes of the newest level by cumulative log-probability (EAGLE-2 §4.1).
    std::stable_sort(level.begin(), level.end(), [&](int32_t a, int32_t c) {
      return all.nodes[static_cast<size_t>(a)].logp > all.nodes[static_cast<size_t>(c)].logp;
    });
    if (static_cast<int>(level.size()) > K) level.resize(static_cast<size_t>(K));
    if (f.next_slot - n + static_cast<int>(level.size()) > room) break;
    f.slot.resize(all.nodes.size(), -1);
    const auto logits = f.feed(all, level);
    const size_t nv = static_cast<size_t>(m_.config().n_vocab);
    std::vector<int32_t> next;
    for (size_t r = 0; r < level.size(); ++r) {
      const int32_t v = level[r];
      const double base = all.nodes[static_cast<size_t>(v)].logp;
      for (const auto& [lp, tok] : top_k_logprobs(logits.subspan(r * nv, n_shared_), K)) {
        next.push_back(all.add(tok, v, base + lp));
      }
    }
    level = std::move(next);
  }
  m_.kv(seq_).truncate(n);  // tree rows stay until accepted() keeps the accepted path's
  f.slot.resize(all.nodes.size(), -1);
  DraftTree kept = keep_best(all, max_nodes, f.slot);
  fed_slot_ = std::move(f.slot);
  fed_base_ = n;
  return kept;
}

DraftTree ModelDrafter::propose_static(std::span<const int32_t> ctx, const TreeBudget& b, int max_nodes,
                                       const SamplingParams& /*params*/) {
  const int n = static_cast<int>(ctx.size());
  const int n_shape = std::min<int>(max_nodes, static_cast<int>(b.shape_parent.size()));
  if (n_shape <= 0) return {};
  // Fill the shape level by level: a node's token is the rank-th most likely token of its
  // parent's draft distribution. Nodes of the shape whose parent was cut are skipped.
  DraftTree t;
  std::vector<int32_t> made(static_cast<size_t>(n_shape), -1);
  TreeFeeder f{m_, seq_, n, std::vector<int32_t>(), n};
  std::vector<std::vector<std::pair<double, int32_t>>> ranked;  // per tree slot (0 = root)
  int max_rank = 0;
  for (int i = 0; i < n_shape; ++i) max_rank = std::max(max_rank, b.shape_rank[static_cast<size_t>(i)] + 1);
  ranked.push_back(top_k_logprobs(feed_context(ctx), max_rank));
  std::vector<int32_t> shape_depth(static_cast<size_t>(n_shape), 1);
  for (int i = 0; i < n_shape; ++i) {
    const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
    if (sp >= 0) shape_depth[static_cast<size_t>(i)] = shape_depth[static_cast<size_t>(sp)] + 1;
  }
  const int depth = *std::max_element(shape_depth.begin(), shape_depth.end());
  const size_t nv = static_cast<size_t>(m_.config().n_vocab);
  for (int d = 1; d <= depth; ++d) {
    // Feed the parents of this level (nodes of level d − 1 that have children) in one forward.
    if (d > 1) {
      std::vector<int32_t> parents;
      for (int i = 0; i < n_shape; ++i) {
        const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
        if (shape_depth[static_cast<size_t>(i)] == d && sp >= 0 && made[static_cast<size_t>(sp)] >= 0 &&
            std::find(parents.begin(), parents.end(), made[static_cast<size_t>(sp)]) == parents.end()) {
          parents.push_back(made[static_cast<size_t>(sp)]);
        }
      }
      if (parents.empty()) break;
      f.slot.resize(t.nodes.size(), -1);
      ranked.resize(t.nodes.size() + 1);
      const auto logits = f.feed(t, parents);
      for (size_t r = 0; r < parents.size(); ++r) {
        ranked[static_cast<size_t>(parents[r]) + 1] = top_k_logprobs(logits.subspan(r * nv, n_shared_), max_rank);
      }
    }
    for (int i = 0; i < n_shape; ++i) {
      if (shape_depth[static_cast<size_t>(i)] != d) continue;
      const int32_t sp = b.shape_parent[static_cast<size_t>(i)];
      const int32_t parent = sp < 0 ? -1 : made[static_cast<size_t>(sp)];
      if (sp >= 0 && parent < 0) continue;
      const auto& cand = ranked[static_cast<size_t>(parent + 1)];
      const int rank = b.shape_rank[static_cast<size_t>(i)];
      if (rank >= static_cast<int>(cand.size())) continue;
      const double base = parent < 0 ? 0.0 : t.nodes[static_cast<size_t>(parent)].logp;
      made[static_cast<size_t>(i)] = t.add(cand[static_cast<size_t>(rank)].second, parent, base + cand[static_cast<size_t>(rank)].first);
    }
  }
  m_.kv(seq_).truncate(n);  // tree rows stay until accepted() keeps the accepted path's
  f.slot.resize(t.nodes.size(), -1);
  fed_slot_ = std::move(f.slot);
  fed_base_ = n;
  return t;
}

}  // namespace specchat
