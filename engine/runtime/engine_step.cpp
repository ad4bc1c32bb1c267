// The Engine's step (engine.h): every running request drafts (model drafts in batched rounds),
// all of them are verified in one batched target forward with tree attention, and each keeps
// what its acceptance rule accepts; feature drafters observe the target's hidden states.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/model.h"
#include "engine/runtime/engine_state.h"
#include "engine/sampler.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/drafter_factory.h"

namespace specchat {

using namespace engine_detail;

int Engine::step() {
  const Turn turn(turns_);
  // Propose: every active sequence drafts its tree. Draft-model trees are built in rounds
  // whose rows of all sequences share one draft forward (draft_rounds); other drafters propose
  // alone.
  std::vector<Seq*> drafting, rounds;
  const int n_ctx = target_.n_ctx();
  for (const auto& sp : seqs_) {
    Seq& s = *sp;
    if (s.done) continue;
    if (s.cancel && s.cancel->load()) {
      s.res.finish = FinishReason::cancelled;
      retire(s);
      continue;
    }
    const int n = static_cast<int>(s.ctx.size());
    if (n > n_ctx) {  // the last token has no KV slot left
      s.res.finish = FinishReason::context_full;
      retire(s);
      continue;
    }
    try {
      // At most n_ctx - n nodes fit behind the last token, and at most max_batch - 1 in one
      // verification forward.
      const auto t0 = Clock::now();
      s.tree = DraftTree();
      int room = std::min(n_ctx - n, target_.max_batch() - 1);
      if (draft_cap_ >= 0) room = std::min(room, draft_cap_);
      // The back-off is asked only when a draft could run (it counts its pause in such steps).
      s.paused = s.backs_off && room > 0 && !s.backoff.should_draft();
      if (s.paused) {
        room = 0;
        ++s.res.stats.n_backoff_steps;
      } else if (s.backs_off && room > 0 && s.backoff.probing()) {
        room = 1;  // a probe after a pause: one draft token measures acceptance at the least cost
      }
      // A feature drafter that missed rows (submitted while drafting was off) catches up first.
      if (!s.taps.empty() && room > 0 && s.drafter->n_observed() < n - 1) feed_features(s);
      ModelDrafter* md = slot_of(s.slot).model_drafter;
      if (s.drafter && room > 0 && s.drafter == md) {
        if (md->begin_tree(s.ctx, s.budget, room, s.req.sampling, s.rng)) rounds.push_back(&s);
      } else if (s.drafter && room > 0) {
        s.tree = s.drafter->propose(s.ctx, s.budget, room, s.req.sampling, s.rng);
      }
      s.res.stats.draft_ms += ms_since(t0);
    } catch (...) {
      s.error = std::current_exception();
      retire(s);
      continue;
    }
    drafting.push_back(&s);
  }
  if (!rounds.empty()) draft_rounds(rounds);
  std::vector<Seq*> ready;
  for (Seq* sp : drafting) {
    Seq& s = *sp;
    if (s.done) continue;  // its drafting failed
    GenerationStats& st = s.res.stats;
    const int n = static_cast<int>(s.ctx.size());
    if (s.drafter && draft_cap_ != 0 && !s.paused && s.tree.empty()) ++st.n_empty_drafts;
    const int n_nodes = s.tree.size();
    st.n_drafted += n_nodes;
    // [last committed token, tree nodes] with tree attention.
    Batch& v = s.verify;
    v.seq = s.slot;
    v.tokens.assign(1, s.ctx.back());
    v.pos.assign(1, n - 1);
    v.parent.assign(1, -1);
    v.out_rows.assign(1, 0);
    v.kv_pos0 = n - 1;
    for (int i = 0; i < n_nodes; ++i) {
      const DraftNode& nd = s.tree.nodes[static_cast<size_t>(i)];
      v.tokens.push_back(nd.token);
      v.pos.push_back(n - 1 + nd.depth);
      v.parent.push_back(nd.parent + 1);
      v.out_rows.push_back(i + 1);
    }
    ready.push_back(&s);
  }
  // Verify: as few target forwards as max_batch allows (one in the usual case).
  std::vector<Seq*> group;
  int rows = 0;
  for (Seq* s : ready) {
    const int r = static_cast<int>(s->verify.tokens.size());
    if (!group.empty() && rows + r > target_.max_batch()) {
      verify_group(group);
      group.clear();
      rows = 0;
    }
    group.push_back(s);
    rows += r;
  }
  if (!group.empty()) verify_group(group);
  return n_active();
}

void Engine::draft_rounds(std::vector<Seq*>& seqs) {
  // Each round: every sequence still drafting gives its rows; they run in as few draft forwards
  // as max_batch allows (one in the usual case), and each drafter takes its rows. A sequence's
  // rows see only its own KV sequence, so its tree is the one it would draft alone.
  const auto t0 = Clock::now();
  std::vector<Seq*> active = seqs, group;
  std::vector<const Batch*> batches;
  auto fail = [&](Seq& s) {
    s.error = std::current_exception();
    retire(s);
  };
  std::vector<std::pair<Seq*, const Batch*>> todo;
  while (!active.empty()) {
    // This round's rows of every sequence still drafting (asked once: round_batch() plans).
    todo.clear();
    for (Seq* sp : active) {
      ModelDrafter& md = *slot_of(sp->slot).model_drafter;
      try {
        if (const Batch* b = md.round_batch()) {
          todo.emplace_back(sp, b);
        } else {
          sp->tree = md.end_tree();
        }
      } catch (...) {
        fail(*sp);
      }
    }
    std::vector<Seq*> next;
    for (size_t i = 0; i < todo.size();) {
      // One forward: sequences in order while their rows fit in max_batch.
      group.clear();
      batches.clear();
      int rows = 0;
      for (; i < todo.size(); ++i) {
        const int r = static_cast<int>(todo[i].second->tokens.size());
        if (!group.empty() && rows + r > draft_->max_batch()) break;
        group.push_back(todo[i].first);
        batches.push_back(todo[i].second);
        rows += r;
      }
      ForwardOut out;
      try {
        out = draft_->forward(batches);
      } catch (...) {
        for (Seq* s : group) fail(*s);
        continue;
      }
      const size_t nv = static_cast<size_t>(draft_->config().n_vocab);
      size_t row0 = 0;
      for (size_t g = 0; g < group.size(); ++g) {
        Seq& s = *group[g];
        const size_t n_out = batches[g]->out_rows.size();
        try {
          slot_of(s.slot).model_drafter->take_round(out.logits.subspan(row0 * nv, n_out * nv));
          next.push_back(&s);
        } catch (...) {
          fail(s);
        }
        row0 += n_out;
      }
    }
    active = std::move(next);
  }
  const double ms = ms_since(t0);
  for (Seq* s : seqs) s->res.stats.draft_ms += ms;
}

void Engine::verify_group(std::vector<Seq*>& group) {
  std::vector<const Batch*> batches;
  batches.reserve(group.size());
  for (Seq* s : group) batches.push_back(&s->verify);
  // The hidden states the group's feature drafters read: the union of their taps, for the
  // sequences whose drafter holds every row before this step's anchor (others catch up later).
  group_taps_.clear();
  for (Seq* s : group) {
    if (s->taps.empty() || s->drafter->n_observed() != static_cast<int>(s->ctx.size()) - 1) continue;
    for (int32_t t : s->taps) {
      if (std::find(group_taps_.begin(), group_taps_.end(), t) == group_taps_.end()) group_taps_.push_back(t);
    }
  }
  const auto t0 = Clock::now();
  ForwardOut out;
  try {
    out = target_.forward(batches, group_taps_);
  } catch (...) {
    for (Seq* s : group) {
      s->error = std::current_exception();
      retire(*s);
    }
    return;
  }
  const double verify_ms = ms_since(t0);
  const size_t nv = static_cast<size_t>(target_.config().n_vocab);
  size_t row = 0;
  for (Seq* sp : group) {
    Seq& s = *sp;
    GenerationStats& st = s.res.stats;
    const int n_nodes = s.tree.size();
    const int n_before = static_cast<int>(s.ctx.size());
    const size_t row0 = row;
    const auto logits = out.logits.subspan(row * nv, static_cast<size_t>(n_nodes + 1) * nv);
    row += static_cast<size_t>(n_nodes) + 1;
    st.verify_ms += verify_ms;
    ++st.n_steps;
    try {
      // NaN/inf weights or activations make every comparison false and argmax silently 0.
      if (!all_finite(logits)) {
        throw GenerationError("non_finite_logits", "the target model produced NaN or infinite logits (" +
                                                       target_.path() + "): the weights are damaged");
      }
      // Accept.
      const auto t1 = Clock::now();
      if (s.p.size() < static_cast<size_t>(n_nodes) + 1) s.p.resize(static_cast<size_t>(n_nodes) + 1);
      for (int i = 0; i <= n_nodes; ++i) {
        process_logits(logits.subspan(static_cast<size_t>(i) * nv, nv), s.req.sampling, s.p[static_cast<size_t>(i)],
                       s.scratch);
      }
      const std::span<const Distribution> p(s.p.data(), static_cast<size_t>(n_nodes) + 1);
      const TreeOutcome oc = accept_tree(s.tree, p, s.req.sampling.greedy(), s.choices);
      const int n_acc = static_cast<int>(oc.path.size());
      if (static_cast<size_t>(n_acc) < st.accepted_hist.size()) st.accepted_hist[static_cast<size_t>(n_acc)]++;
      st.sample_ms += ms_since(t1);
      // Commit: the target's cache keeps [last, accepted path] (rows moved into place); the new
      // last token is fed by the next step.
      s.keep_rows.assign(1, 0);
      s.keep_ids.assign(1, s.ctx.back());
      for (int32_t v : oc.path) {
        s.keep_rows.push_back(v + 1);
        s.keep_ids.push_back(s.tree.nodes[static_cast<size_t>(v)].token);
      }
      target_.kv(s.slot).keep_path(s.keep_rows, s.keep_ids);
      if (s.drafter) s.drafter->accepted(s.tree, oc.path);
      if (s.backs_off && !s.tree.empty()) s.backoff.drafted_step(n_acc);
      const int step = st.n_steps - 1;
      st.decode_ms = ms_since(s.t_decode);  // running value for TokenEvent::stats
      for (int i = 0; i <= n_acc && s.running; ++i) {
        const bool drafted = i < n_acc;
        const int32_t id = drafted ? s.keep_ids[static_cast<size_t>(i) + 1] : oc.next_token;
        const size_t before = s.res.tokens.size();
        s.running = s.em.push(id, drafted, step);
        ++st.n_target_tokens;
        if (s.res.tokens.size() > before) s.ctx.push_back(id);
      }
      if (st.ttft_ms == 0 && !s.res.tokens.empty()) st.ttft_ms = ms_since(s.t_start);
      if (!s.taps.empty() && !group_taps_.empty()) observe_step(s, out, row0, n_before, oc.path);
    } catch (...) {
      s.error = std::current_exception();
      s.running = false;
    }
    if (!s.running) retire(s);
  }
}

int Engine::feed_features(Seq& s) {
  Drafter& d = *s.drafter;
  const int n = static_cast<int>(s.ctx.size());
  d.sync(s.ctx);  // cuts its rows to the prefix shared with ctx (at most n − 1)
  const int have = d.n_observed();
  if (have > n - 1) {
    throw std::logic_error("Engine: the " + std::string(drafter_kind_name(s.req.spec.drafter)) + " drafter holds " +
                           std::to_string(have) + " rows after sync, more than the " + std::to_string(n - 1) +
                           " committed tokens before the last");
  }
  // The target re-feeds every row the drafter lacks (its cache may hold more: the slot's
  // previous request used another drafter, or this one was submitted while drafting was off).
  KvCache& kv = target_.kv(s.slot);
  const int kept = std::min({kv.common_prefix(s.ctx), have, n - 1});
  kv.truncate(kept);
  if (n == 1) return kept;
  const int d_model = target_.config().d_model;
  target_.sync_cache_hidden(s.ctx, n - 1, s.slot, s.taps, [&](int pos0, int n_rows, std::span<const float> hidden) {
    // Rows the drafter already holds (the target's cache was shorter) are skipped.
    const int skip = std::clamp(d.n_observed() - pos0, 0, n_rows);
    if (skip == n_rows) return;
    HiddenRows h;
    h.taps = s.taps;
    h.tap_stride = static_cast<size_t>(n_rows) * static_cast<size_t>(d_model);
    h.data = hidden.data() + static_cast<size_t>(skip) * static_cast<size_t>(d_model);
    h.n_rows = n_rows - skip;
    h.d_model = d_model;
    const int p0 = pos0 + skip;
    d.observe(p0, std::span<const int32_t>(s.ctx).subspan(static_cast<size_t>(p0), static_cast<size_t>(h.n_rows) + 1), h);
  });
  return kept;
}

void Engine::observe_step(Seq& s, const ForwardOut& out, size_t row0, int n_before, std::span<const int32_t> path) {
  Drafter& d = *s.drafter;
  if (d.n_observed() != n_before - 1) return;  // not fed this step (it was behind): caught up later
  // Committed now: ctx grew by the emitted tokens; a stop string may also have taken back kept
  // tokens (retire then cuts the drafter with finished()).
  const int committed = s.running ? static_cast<int>(s.ctx.size())
                                  : static_cast<int>(s.req.prompt.size() + s.res.tokens.size());
  // Rows n_before − 1 … committed − 2: the anchor (batch row 0) and the accepted path's nodes.
  const int n_rows = std::min(committed - n_before, static_cast<int>(path.size()) + 1);
  if (n_rows <= 0) return;
  const size_t dm = static_cast<size_t>(target_.config().d_model);
  const size_t n_out = out.hidden.size() / (group_taps_.size() * dm);  // Σ out_rows of the forward
  const size_t stride = static_cast<size_t>(n_rows) * dm;
  s.hidden.resize(group_taps_.size() * stride);
  for (size_t t = 0; t < group_taps_.size(); ++t) {
    for (int r = 0; r < n_rows; ++r) {
      const size_t src_row = row0 + (r == 0 ? 0 : static_cast<size_t>(path[static_cast<size_t>(r) - 1]) + 1);
      const float* src = out.hidden.data() + (t * n_out + src_row) * dm;
      std::copy_n(src, dm, s.hidden.data() + t * stride + static_cast<size_t>(r) * dm);
    }
  }
  HiddenRows h;
  h.taps = group_taps_;
  h.data = s.hidden.data();
  h.tap_stride = stride;
  h.n_rows = n_rows;
  h.d_model = static_cast<int>(dm);
  const int pos0 = n_before - 1;
  d.observe(pos0, std::span<const int32_t>(s.ctx).subspan(static_cast<size_t>(pos0), static_cast<size_t>(n_rows) + 1), h);
}

}  // namespace specchat
