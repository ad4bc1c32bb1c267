#include "engine/runtime/engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/model.h"
#include "engine/runtime/emitter.h"
#include "engine/runtime/engine_state.h"
#include "engine/runtime/turn_lock.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/draft_backoff.h"
#include "engine/speculative/drafter.h"
#include "engine/speculative/drafter_factory.h"

namespace specchat {

using namespace engine_detail;

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

}  // namespace specchat
