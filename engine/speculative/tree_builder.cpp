#include "engine/speculative/tree_builder.h"

#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace specchat {

void LogitsSource::set_rows(std::vector<const float*> rows, size_t n_ids) {
  rows_ = std::move(rows);
  n_ids_ = n_ids;
}

void LogitsSource::set_rows(std::span<const float> logits, size_t n_vocab, size_t n_ids) {
  rows_.clear();
  for (size_t off = 0; n_vocab > 0 && off + n_vocab <= logits.size(); off += n_vocab) rows_.push_back(logits.data() + off);
  n_ids_ = n_ids;
}

void LogitsSource::top(int r, int k, std::vector<Candidate>& out) {
  out.clear();
  const float* row = rows_.at(static_cast<size_t>(r));
  k = std::min<int>(k, static_cast<int>(n_ids_));
  if (!row || k <= 0) return;
  // Vectorised (kernels/cpu/sampling.h): with a std::exp per vocabulary entry a Sequoia tree of
  // 3 nodes (a chain of 3) ran at 0.88-0.93x the chain's tokens/s, now 0.97-1.01x (bench,
  // 2026-12-05, docs/perf/cpu.md).
  const double lse = cpu::logsumexp_row(row, static_cast<int64_t>(n_ids_));
  if (k == 1) {  // a chain-shaped level: the vectorised argmax (the first maximum: the lowest id on ties)
    const int32_t id = cpu::argmax_row(row, static_cast<int64_t>(n_ids_));
    out.push_back({row[id] - lse, id});
    return;
  }
  // One pass keeping the k best (logit descending, lower id first on ties) in a small sorted
  // array: k is a branching factor or a Sequoia rank (a handful), so this beats sorting the
  // vocabulary for every scored node.
  auto better = [&](int32_t a, int32_t b) {
    const float la = row[a], lb = row[b];
    return la > lb || (la == lb && a < b);
  };
  std::vector<int32_t> best;
  best.reserve(static_cast<size_t>(k) + 1);
  for (int32_t id = 0; id < static_cast<int32_t>(n_ids_); ++id) {
    if (static_cast<int>(best.size()) == k && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (static_cast<int>(best.size()) > k) best.pop_back();
  }
  for (int32_t id : best) out.push_back({row[id] - lse, id});
}

bool LogitsSource::distribution(int r, const SamplingParams& params, Distribution& q) {
  const float* row = rows_.at(static_cast<size_t>(r));
  if (!row) {
    q.ids.clear();
    q.probs.clear();
    return true;
  }
  process_logits(std::span<const float>(row, n_ids_), params, q, scratch_);
  return true;
}

TreeBuilder::TreeBuilder(const TreeBudget& budget, int max_nodes, const SamplingParams& params)
    : b_(budget), cap_(std::min(max_nodes, budget.node_budget)), params_(params) {
  if (cap_ <= 0) return;
  if (b_.mode == TreeMode::optimal) {
    const int n_shape =
        std::min<int>(cap_, static_cast<int>(std::min(b_.shape_parent.size(), b_.shape_rank.size())));
    if (n_shape <= 0) return;
    sdepth_.assign(static_cast<size_t>(n_shape), 1);
    made_.assign(static_cast<size_t>(n_shape), -1);
    for (int i = 0; i < n_shape; ++i) {
      const int32_t sp = b_.shape_parent[static_cast<size_t>(i)];
      if (sp >= i) throw std::invalid_argument("TreeBuilder: a tree shape lists a child before its parent");
      if (sp >= 0) sdepth_[static_cast<size_t>(i)] = sdepth_[static_cast<size_t>(sp)] + 1;
      max_rank_ = std::max(max_rank_, b_.shape_rank[static_cast<size_t>(i)] + 1);
    }
  }
  wanted_ = {0};
}

void TreeBuilder::plan_static_level(int d) {
  // The slots to score for level d: the made parents of the shape's level-d nodes.
  wanted_.clear();
  for (size_t i = 0; i < sdepth_.size(); ++i) {
    if (sdepth_[i] != d) continue;
    const int32_t sp = b_.shape_parent[i];
    if (sp < 0 || made_[static_cast<size_t>(sp)] < 0) continue;
    const int32_t slot = made_[static_cast<size_t>(sp)] + 1;
    if (std::find(wanted_.begin(), wanted_.end(), slot) == wanted_.end()) wanted_.push_back(slot);
  }
}

void TreeBuilder::advance(NodeSource& src, Choices& choices) {
  if (wanted_.empty()) return;
  const std::vector<int32_t> slots = std::move(wanted_);
  wanted_.clear();
  auto base_logp = [&](int32_t slot) { return slot == 0 ? 0.0 : all_.nodes[static_cast<size_t>(slot - 1)].logp; };
  switch (b_.mode) {
    case TreeMode::chain: {
      const int32_t slot = slots[0];
      int32_t tok;
      double lp;
      if (src.distribution(0, params_, q_)) {
        if (q_.ids.empty()) return;
        const bool sample = !params_.greedy();
        tok = sample ? choices.draw(q_) : q_.ids[0];
        const double pr = q_.prob(tok);
        lp = pr > 0 ? std::log(pr) : -1e30;
        // Sampled children were drawn from q (the rule needs it); the argmax is a fixed
        // function of q (deterministic, the default: no copy of q needed).
        if (sample) all_.set_children_source(slot, q_, ChildSampling::with_replacement);
      } else {
        src.top(0, 1, cand_);
        if (cand_.empty()) return;
        tok = cand_[0].token;
        lp = cand_[0].logp;
      }
      const int32_t v = all_.add(tok, slot - 1, base_logp(slot) + lp);
      if (all_.size() < cap_ && src.room() >= 1) wanted_ = {v + 1};
      return;
    }
    case TreeMode::dynamic: {
      if (src.free_scoring()) {
        best_first(src, slots[0]);
        return;
      }
      const int K = std::max(1, b_.branch), D = std::max(1, b_.depth);
      std::vector<int32_t> next;
      for (size_t r = 0; r < slots.size(); ++r) {
        src.top(static_cast<int>(r), K, cand_);
        const double base = base_logp(slots[r]);
        for (const Candidate& c : cand_) next.push_back(all_.add(c.token, slots[r] - 1, base + c.logp));
      }
      ++depth_;
      level_ = std::move(next);
      if (depth_ >= D || level_.empty()) return;
      // Score the top-K nodes of the newest level by cumulative log-probability (EAGLE-2 §4.1).
      std::stable_sort(level_.begin(), level_.end(), [&](int32_t a, int32_t c) {
        return all_.nodes[static_cast<size_t>(a)].logp > all_.nodes[static_cast<size_t>(c)].logp;
      });
      if (static_cast<int>(level_.size()) > K) level_.resize(static_cast<size_t>(K));
      if (static_cast<int>(level_.size()) > src.room()) return;
      for (int32_t v : level_) wanted_.push_back(v + 1);
      return;
    }
    case TreeMode::optimal: {
      const int d = ++depth_;
      // Candidates per scored slot of this round.
      std::vector<std::vector<Candidate>> ranked(slots.size());
      for (size_t r = 0; r < slots.size(); ++r) src.top(static_cast<int>(r), max_rank_, ranked[r]);
      for (size_t i = 0; i < sdepth_.size(); ++i) {
        if (sdepth_[i] != d) continue;
        const int32_t sp = b_.shape_parent[i];
        const int32_t parent = sp < 0 ? -1 : made_[static_cast<size_t>(sp)];
        if (sp >= 0 && parent < 0) continue;  // its parent was cut
        const auto it = std::find(slots.begin(), slots.end(), parent + 1);
        if (it == slots.end()) continue;
        const auto& cand = ranked[static_cast<size_t>(it - slots.begin())];
        const int rank = b_.shape_rank[i];
        if (rank < 0 || rank >= static_cast<int>(cand.size())) continue;
        const Candidate& c = cand[static_cast<size_t>(rank)];
        made_[i] = all_.add(c.token, parent, base_logp(parent + 1) + c.logp);
      }
      plan_static_level(d + 1);
      if (static_cast<int>(wanted_.size()) > src.room()) wanted_.clear();
      return;
    }
  }
}

void TreeBuilder::best_first(NodeSource& src, int32_t slot) {
  const int K = std::max(1, b_.branch), D = std::max(1, b_.depth);
  // Pops the best (highest logp, then earliest) candidate: a max-heap on (logp, −order).
  auto later_first = [](const Pending& a, const Pending& b) {
    return a.logp < b.logp || (a.logp == b.logp && a.order > b.order);
  };
  src.top(0, K, cand_);
  const double base = slot == 0 ? 0.0 : all_.nodes[static_cast<size_t>(slot - 1)].logp;
  const int32_t depth = slot == 0 ? 1 : all_.nodes[static_cast<size_t>(slot - 1)].depth + 1;
  for (const Candidate& c : cand_) {
    frontier_.push_back({base + c.logp, n_pushed_++, c.token, slot - 1, depth});
    std::push_heap(frontier_.begin(), frontier_.end(), later_first);
  }
  while (all_.size() < cap_ && !frontier_.empty()) {
    std::pop_heap(frontier_.begin(), frontier_.end(), later_first);
    const Pending p = frontier_.back();
    frontier_.pop_back();
    const int32_t v = all_.add(p.token, p.parent, p.logp);
    if (p.depth < D && all_.size() < cap_ && src.room() >= 1) {
      wanted_ = {v + 1};  // its children join the frontier next round
      return;
    }
  }
}

DraftTree TreeBuilder::finish(std::vector<int32_t>* from) {
  wanted_.clear();
  if (b_.mode != TreeMode::dynamic || all_.size() <= cap_) {
    if (from) {
      from->resize(all_.nodes.size());
      std::iota(from->begin(), from->end(), 0);
    }
    return std::move(all_);
  }
  // Keep the best cap_ nodes by cumulative log-probability (ties: earlier node first, so a
  // parent precedes its children and the kept set is ancestor-closed), renumbered.
  std::vector<int32_t> order(all_.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return all_.nodes[static_cast<size_t>(a)].logp > all_.nodes[static_cast<size_t>(b)].logp;
  });
  std::vector<uint8_t> keep(all_.nodes.size(), 0);
  for (int i = 0; i < cap_; ++i) keep[static_cast<size_t>(order[static_cast<size_t>(i)])] = 1;
  DraftTree out;
  std::vector<int32_t> remap(all_.nodes.size(), -1);
  if (from) from->clear();
  for (size_t i = 0; i < all_.nodes.size(); ++i) {
    const DraftNode& nd = all_.nodes[i];
    if (!keep[i] || (nd.parent >= 0 && remap[static_cast<size_t>(nd.parent)] < 0)) continue;
    remap[i] = out.add(nd.token, nd.parent < 0 ? -1 : remap[static_cast<size_t>(nd.parent)], nd.logp);
    if (from) from->push_back(static_cast<int32_t>(i));
  }
  return out;  // every slot's children are deterministic (the default)
}

DraftTree build_tree(NodeSource& source, const TreeBudget& budget, int max_nodes, const SamplingParams& params,
                     Choices& choices, std::vector<int32_t>* from) {
  TreeBuilder tb(budget, max_nodes, params);
  while (!tb.wanted().empty()) {
    source.score(tb.tree(), tb.wanted());
    tb.advance(source, choices);
  }
  return tb.finish(from);
}

}  // namespace specchat
