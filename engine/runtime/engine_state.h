// Internal to the Engine (engine.cpp: requests and slots; engine_step.cpp: a step's drafting,
// batched verification and acceptance): the per-slot and per-request state the two share.
#pragma once

#include <array>
#include <chrono>
#include <exception>
#include <memory>
#include <vector>

#include "engine/runtime/emitter.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/turn_lock.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/draft_backoff.h"
#include "engine/speculative/drafter.h"

namespace specchat {

namespace engine_detail {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

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

inline constexpr int kDrafterKinds = 4;
inline size_t kind_index(DrafterKind k) { return static_cast<size_t>(k); }
inline bool is_feature_kind(DrafterKind k) { return k == DrafterKind::block || k == DrafterKind::mtp; }

}  // namespace engine_detail

// The drafters of one KV slot, one per kind (null: not offered), made by make_drafter: the
// draft model's (drafting in the same sequence of the draft's pool) and n-gram's at
// construction, the feature drafters' (block, mtp) by set_drafter_factory.
struct Engine::Slot {
  std::array<std::unique_ptr<Drafter>, engine_detail::kDrafterKinds> by_kind;
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
  engine_detail::Clock::time_point t_start, t_decode;
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

}  // namespace specchat
