#include "engine/runtime/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/model.h"
#include "engine/runtime/emitter.h"
#include "engine/runtime/turn_lock.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/draft_backoff.h"
#include "engine/speculative/drafter.h"
#include "engine/speculative/drafter_factory.h"

namespace specchat {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Holds the shared engines' TurnLock (EngineShare::turns) for one call; nothing when unshared.
class Turn {
 public:
  explicit Turn(TurnLock* t) : t_(t) {
    if (t_) t_->lock();
  }
  ~Turn() {
    if (t_) t_->unlock();
  }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

 private:
  TurnLock* t_;
};
}  // namespace

constexpr int kDrafterKinds = 4;
size_t kind_index(DrafterKind k) { return static_cast<size_t>(k); }
bool is_feature_kind(DrafterKind k) { return k == DrafterKind::block || k == DrafterKind::mtp; }

// The drafters of one KV slot, one per kind (null: not offered), made by make_drafter: the
// draft model's (drafting in the same sequence of the draft's pool) and n-gram's at
// construction, the feature drafters' (block, mtp) by set_drafter_factory.
struct Engine::Slot {
  std::array<std::unique_ptr<Drafter>, kDrafterKinds> by_kind;
  ModelDrafter* model_drafter = nullptr;  // by_kind[model], typed: its rounds are batched (draft_rounds)
  bool busy = false;
  // Every drafter of the slot, for finished()/clear().
  template <typename F>
  void each(F&& f) {
    for (auto& d : by_kind) {
      if (d) f(*d);
    }
  }
};

// One request's state between steps.
struct Engine::Seq {
  Seq(SeqId id_, int slot_, const GenerateRequest& r, TokenCallback cb_, const std::atomic<bool>* c, const Vocab& v)
      : id(id_), slot(slot_), req(r), cb(std::move(cb_)), cancel(c), rng(r.sampling.seed), choices(rng),
        em(v, req, cb, res) {}
  SeqId id;
  int slot;
  GenerateRequest req;
  TokenCallback cb;
  const std::atomic<bool>* cancel;
  Rng rng;
  RngChoices choices;
  GenerationResult res;
  Emitter em;  // refers to req, cb and res above
  Drafter* drafter = nullptr;
  DraftBackoff backoff;
  // The back-off applies (set at submit): a drafter that costs a forward per draft (the draft
  // model, the block drafter, the MTP head) and SpecConfig::backoff. The n-gram drafter's drafts
  // cost a lookup: pausing it would only lose the drafts that match later.
  bool backs_off = false;
  bool paused = false;  // this step decodes plainly: the back-off paused drafting
  std::vector<int32_t> taps;  // drafter->target_taps(), read once at submit (empty: none)
  std::vector<float> hidden;  // [taps of the group, rows, d_model] rows handed to observe, reused
  TreeBudget budget;
  std::vector<int32_t> ctx;  // prompt + emitted tokens
  Clock::time_point t_start, t_decode;
  bool running = true;
  bool done = false;
  std::exception_ptr error;
  // This step's draft tree, verification batch and the rows of its logits in the forward.
  DraftTree tree;
  Batch verify;
  std::vector<Distribution> p;  // [rows] processed target distributions, buffers reused per step
  SamplerScratch scratch;
  std::vector<int32_t> keep_rows, keep_ids;
};

Engine::Engine(LlamaModel& target, LlamaModel* draft, const EngineShare& share)
    : target_(target), draft_(draft), first_seq_(share.first_seq), turns_(share.turns) {
  const int pool = target.n_seq();
  if (draft && draft->n_seq() < pool) {
    throw std::invalid_argument("Engine: the draft model has " + std::to_string(draft->n_seq()) +
                                " sequences, the target " + std::to_string(pool));
  }
  const int n = share.n_seq < 0 ? pool - share.first_seq : share.n_seq;
  if (share.first_seq < 0 || n < 1 || share.first_seq + n > pool) {
    throw std::invalid_argument("Engine: sequences [" + std::to_string(share.first_seq) + ", " +
                                std::to_string(share.first_seq + n) + ") are not inside the pool of " +
                                std::to_string(pool));
  }
  for (int i = first_seq_; i < first_seq_ + n; ++i) {
    auto s = std::make_unique<Slot>();
    DrafterModels models;
    models.target = &target;
    models.draft = draft;
    for (DrafterKind k : {DrafterKind::model, DrafterKind::ngram}) s->by_kind[kind_index(k)] = make_drafter(k, i, models);
    s->model_drafter = static_cast<ModelDrafter*>(s->by_kind[kind_index(DrafterKind::model)].get());
    slots_.push_back(std::move(s));
  }
}

Engine::~Engine() = default;

int Engine::capacity() const { return static_cast<int>(slots_.size()); }

Engine::Slot& Engine::slot_of(int kv_seq) const { return *slots_[static_cast<size_t>(kv_seq - first_seq_)]; }

int Engine::n_active() const {
  int n = 0;
  for (const auto& s : seqs_) n += s->done ? 0 : 1;
  return n;
}

Engine::Seq* Engine::find(SeqId id) const {
  for (const auto& s : seqs_) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

bool Engine::finished(SeqId id) const {
  const Seq* s = find(id);
  return s && s->done;
}

Engine::SeqId Engine::submit(const GenerateRequest& req, TokenCallback on_token, const std::atomic<bool>* cancel) {
  const Turn turn(turns_);
  const auto t_start = Clock::now();
  const int n_ctx = target_.n_ctx();
  const int n_prompt = static_cast<int>(req.prompt.size());
  if (n_prompt == 0) throw GenerationError("empty_prompt", "the prompt has no tokens");
  if (n_prompt > n_ctx) {
    throw GenerationError("prompt_too_long",
                          "prompt has " + std::to_string(n_prompt) + " tokens, context is " + std::to_string(n_ctx));
  }
  for (int32_t t : req.prompt) {
    if (t < 0 || t >= target_.config().n_vocab) {
      throw GenerationError("bad_token", "prompt token id " + std::to_string(t) + " out of range");
    }
  }
  // The free slot whose cache shares the longest prefix with the prompt (lowest index on ties).
  int slot = -1, best = -1;
  for (int i = first_seq_; i < first_seq_ + capacity(); ++i) {
    if (slot_of(i).busy) continue;
    const int common = target_.kv(i).common_prefix(req.prompt);
    if (common > best) {
      best = common;
      slot = i;
    }
  }
  if (slot < 0) {
    throw GenerationError("engine_full", "all " + std::to_string(capacity()) + " sequences are busy");
  }
  auto sp = std::make_unique<Seq>(next_id_++, slot, req, std::move(on_token), cancel, target_.vocab());
  Seq& s = *sp;
  s.t_start = t_start;
  GenerationStats& st = s.res.stats;
  st.n_prompt = n_prompt;
  // The drafter of this request: none when draft_k is 0, or the model drafter has no model.
  Slot& sl = slot_of(slot);
  if (req.spec.draft_k > 0) {
    s.drafter = sl.by_kind[kind_index(req.spec.drafter)].get();
    if (is_feature_kind(req.spec.drafter)) {
      if (!s.drafter) {
        throw GenerationError("drafter_unavailable", std::string("no ") + drafter_kind_name(req.spec.drafter) +
                                                         " drafter is loaded in this engine");
      }
      s.taps = s.drafter->target_taps();
    }
  }
  s.backs_off = s.drafter && req.spec.backoff && req.spec.drafter != DrafterKind::ngram;
  s.budget = req.spec.effective_budget();
  st.accepted_hist.assign(static_cast<size_t>(s.drafter ? std::max(1, s.budget.depth) : 0) + 1, 0);
  s.ctx = req.prompt;
  s.ctx.reserve(s.ctx.size() + static_cast<size_t>(std::max(0, req.max_tokens)) + 1);
  // The target's cache holds all of ctx but the last token, which each step's verification
  // batch starts with.
  st.n_prompt_cached = std::min(target_.kv(slot).common_prefix(s.ctx), n_prompt - 1);
  // With drafting switched off (set_draft_cap(0)) the drafter is not prefilled: propose() feeds
  // its cache itself if drafting resumes, and a wide batch does not pay a draft prefill per
  // request. A feature drafter is then caught up by step() when drafting resumes (feed_features).
  if (!s.taps.empty() && draft_cap_ != 0) {
    // The target's prefill, with the hidden states of the fed rows for the drafter.
    st.n_prompt_cached = std::min(feed_features(s), n_prompt - 1);
  } else {
    if (n_prompt > 1) target_.sync_cache(s.ctx, n_prompt - 1, false, slot);
    else target_.kv(slot).truncate(0);
    // A feature drafter not fed now still drops rows of another context (the slot's previous
    // request): rows it keeps must be those of ctx's tokens.
    if (s.drafter && (draft_cap_ != 0 || !s.taps.empty())) s.drafter->sync(s.ctx);
  }
  st.prefill_ms = ms_since(t_start);
  s.t_decode = Clock::now();
  s.running = req.max_tokens > 0;
  if (!s.running) s.res.finish = FinishReason::length;
  sl.busy = true;
  seqs_.push_back(std::move(sp));
  if (!s.running) retire(s);
  return s.id;
}

void Engine::retire(Seq& s) {
  GenerationStats& st = s.res.stats;
  if (!s.error) s.em.finish();  // a failed sequence releases nothing more
  st.n_generated = static_cast<int>(s.res.tokens.size());
  st.n_accepted = 0;
  for (uint8_t d : s.res.drafted) st.n_accepted += d;
  st.decode_ms = ms_since(s.t_decode);
  if (st.ttft_ms == 0) st.ttft_ms = ms_since(s.t_start);
  // Keep in the caches exactly the prompt and the kept tokens (nothing past a stop or EOS).
  std::vector<int32_t> final_ctx = s.req.prompt;
  final_ctx.insert(final_ctx.end(), s.res.tokens.begin(), s.res.tokens.end());
  KvCache& kv = target_.kv(s.slot);
  kv.truncate(kv.common_prefix(final_ctx));
  // Every drafter of the slot (not only this request's: an earlier request may have used the
  // model drafter, whose cache must not keep rows past what the slot now holds).
  // A feature drafter's rows past a stop or EOS go here too.
  Slot& sl = slot_of(s.slot);
  sl.each([&](Drafter& d) { d.finished(final_ctx); });
  s.done = true;
  sl.busy = false;
}

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
      if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); })) {
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

void Engine::run_until_finished(SeqId id) {
  if (!find(id)) throw std::invalid_argument("Engine: unknown sequence " + std::to_string(id));
  while (!finished(id)) step();
}

GenerationResult Engine::take(SeqId id) {
  auto it = std::find_if(seqs_.begin(), seqs_.end(), [&](const auto& s) { return s->id == id; });
  if (it == seqs_.end()) throw std::invalid_argument("Engine: unknown sequence " + std::to_string(id));
  if (!(*it)->done) throw std::invalid_argument("Engine: sequence " + std::to_string(id) + " has not finished");
  std::unique_ptr<Seq> s = std::move(*it);
  seqs_.erase(it);
  if (s->error) std::rethrow_exception(s->error);
  return std::move(s->res);
}

void Engine::set_draft_cap(int max_nodes) {
  if (max_nodes < -1) throw std::invalid_argument("Engine::set_draft_cap: " + std::to_string(max_nodes) + " < -1");
  draft_cap_ = max_nodes;
}

void Engine::clear_cache() {
  const Turn turn(turns_);
  for (int i = first_seq_; i < first_seq_ + capacity(); ++i) {
    Slot& sl = slot_of(i);
    if (sl.busy) continue;
    target_.kv(i).truncate(0);
    sl.each([](Drafter& d) { d.clear(); });
  }
}

void Engine::set_drafter_factory(DrafterKind kind, const DrafterFactory& make) {
  if (!is_feature_kind(kind)) {
    throw std::invalid_argument(std::string("Engine::set_drafter_factory: ") + drafter_kind_name(kind) +
                                " drafters are built in (only block and mtp take a factory)");
  }
  if (n_active() > 0) throw std::logic_error("Engine::set_drafter_factory: requests are active");
  const Turn turn(turns_);
  std::vector<std::unique_ptr<Drafter>> made(slots_.size());
  if (make) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      made[i] = make(first_seq_ + static_cast<int>(i));
      if (!made[i]) {
        throw std::invalid_argument(std::string("Engine::set_drafter_factory: the ") + drafter_kind_name(kind) +
                                    " factory returned no drafter for slot " + std::to_string(first_seq_ + static_cast<int>(i)));
      }
    }
  }
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i]->by_kind[kind_index(kind)] = std::move(made[i]);
}

bool Engine::has_drafter(DrafterKind kind) const {
  return !slots_.empty() && slots_[0]->by_kind[kind_index(kind)] != nullptr;
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
