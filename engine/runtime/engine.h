// Engine: steps many sequences of one target (and optional draft) model together.
//
// Runtime shape (ARCHITECTURE.md §3): the weights are immutable and shared; every request is a
// sequence with its own KV slots from the models' pools (LlamaModel::Options::n_seq), its own
// drafter state, sampler, statistics and cancel flag. Each step drafts for every active
// sequence, verifies all their draft trees in ONE target forward (tree attention per sequence)
// and accepts per sequence. Requests join (submit) and leave (finish, cancel) between steps:
// continuous batching. Baseline decoding is the same step with an empty draft.
//
// Output per sequence is exactly what decoding it alone gives: the forward of a row depends on
// its own sequence only (the CPU kernels are batch-invariant, cpu::linear), and each sequence
// has its own RNG seeded from its request.
//
// Drafters that read the target's hidden states (DrafterKind block and mtp; contract:
// docs/design/target-feature-drafters.md, "Context features") are fed by the target's own
// forwards: the prompt prefill and each verification forward also return the hidden states of
// the drafter's target_taps(), and the rows of committed tokens are handed to observe(). The
// drafter then holds one context row per committed token except the last, never a row of a
// token that was not committed. A drafter that missed rows (submitted while drafting was off)
// is caught up before its next proposal by re-feeding the missing rows through the target.
//
// Not thread-safe: one thread calls submit/step/take (the GUI's engine thread, the CLI, the
// server's scheduler). Callbacks run on that thread, inside step(). Two engines may share one
// model pair from two threads (the app's chat and its server): each takes its own range of KV
// sequences and both take turns on one TurnLock (EngineShare).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include "engine/generator.h"

namespace specchat {

class Drafter;
class LlamaModel;
class TurnLock;
struct ForwardOut;

// How an Engine shares its models with other engines on other threads (the app's chat and the
// server started from its Settings, which serve from the chat's loaded models instead of a
// second copy). The engine uses only KV sequences [first_seq, first_seq + n_seq) of the target's
// (and the draft's) pool, and holds `turns` during every call that runs the models (submit,
// step, clear_cache, set_drafter_factory), so engines on other threads with disjoint ranges and
// the same lock run their steps in turn. Output is unchanged: a sequence's forward depends on
// its own sequence only. Defaults: every sequence of the pool, no lock (the engine owns the pair).
struct EngineShare {
  int first_seq = 0;
  int n_seq = -1;             // -1: every sequence from first_seq to the end of the pool
  TurnLock* turns = nullptr;  // must outlive the engine; null: no other engine runs the models
};

class Engine {
 public:
  using SeqId = int64_t;
  // Makes the drafter of KV slot `slot` (a KV sequence id of the engine's range, EngineShare);
  // called once per slot.
  using DrafterFactory = std::function<std::unique_ptr<Drafter>(int slot)>;

  // `target` (and `draft`, which may be null) must outlive the engine. Capacity: the sequences
  // `share` gives it (by default the target's n_seq); the range must lie inside the target's
  // pool and a draft model's pool must be at least as large as the target's
  // (std::invalid_argument otherwise). The draft's vocabulary must already have been checked
  // (check_draft_vocab).
  Engine(LlamaModel& target, LlamaModel* draft, const EngineShare& share = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Most sequences active at once (the KV pool size).
  int capacity() const;
  int n_active() const;

  // Adds a request: validates it, takes a free KV slot (the one whose cache shares the longest
  // prefix with the prompt, so a conversation's next turn reuses its KV rows), and prefills the
  // target and the drafter. `on_token` runs inside later step() calls; `cancel` (may be null)
  // is read before each step. Throws GenerationError ("empty_prompt", "prompt_too_long",
  // "bad_token", "engine_full" when every slot is busy, "drafter_unavailable" for a block or
  // mtp drafter (draft_k > 0) when no factory was given for that kind: such a request is
  // refused, not run without drafting, so a misconfigured front end is noticed); nothing is kept
  // on a throw. A drafter with target_taps() is prefilled from the target's prompt prefill (the
  // prompt rows the target's cache holds past the drafter's are re-fed for their hidden states).
  SeqId submit(const GenerateRequest& req, TokenCallback on_token = {}, const std::atomic<bool>* cancel = nullptr);

  // One decode step for every active sequence (see the header comment). Verification rows of
  // all sequences go into one target forward, split in several only when they exceed the
  // target's max_batch. Returns the number of sequences still active.
  int step();

  // Steps until sequence `id` has finished (other sequences advance too).
  void run_until_finished(SeqId id);

  bool finished(SeqId id) const;
  // Takes a finished sequence's result (once) and frees its handle. Rethrows the error that
  // ended it (GenerationError "non_finite_logits", BackendError, ...). std::invalid_argument
  // for an unknown or unfinished id.
  GenerationResult take(SeqId id);

  // Forgets every idle slot's cached prefix, in the target and the draft (cold runs).
  void clear_cache();

  // Caps every sequence's draft tree at `max_nodes` nodes from the next step on: 0 = no
  // drafting (plain decoding steps), -1 = no cap (each request's own budget; the default).
  // Lossless either way: drafts change how many target forwards a reply takes, never its
  // tokens (greedy) or their distribution. The server shortens drafts as its batch grows
  // (app/serve/draft_policy.h). std::invalid_argument below -1.
  void set_draft_cap(int max_nodes);
  int draft_cap() const { return draft_cap_; }

  // Installs the drafters of `kind` (DrafterKind::block or mtp): make(slot) is called now for
  // every slot (the KV sequence id, in [first_seq, first_seq + capacity())), and a request of that kind uses its slot's drafter (each drafter serves one
  // sequence at a time, so it may keep per-sequence state such as context rows and a KV cache).
  // A null `make` removes them (requests of that kind are then refused). The drafters live as
  // long as the engine or until replaced; make must not return null.
  // std::invalid_argument for another kind or a null drafter; std::logic_error while a request
  // is active (a drafter must not change under a running sequence). Throws what make throws
  // (nothing is installed then).
  void set_drafter_factory(DrafterKind kind, const DrafterFactory& make);
  // Whether drafters of `kind` can run: model = a draft model was given, ngram always, block /
  // mtp = a factory was installed.
  bool has_drafter(DrafterKind kind) const;

  LlamaModel& target() { return target_; }
  LlamaModel* draft() { return draft_; }

 private:
  struct Seq;
  Seq* find(SeqId id) const;
  // Runs the draft-model trees begun for `seqs` (ModelDrafter::begin_tree) round by round, the
  // rows of all of them in one draft forward per round; sets each one's tree. A sequence whose
  // drafting throws is retired with the error.
  void draft_rounds(std::vector<Seq*>& seqs);
  void verify_group(std::vector<Seq*>& group);
  void retire(Seq& s);
  // Feature drafters (non-empty taps): brings s's drafter to hold rows for ctx[0, n − 1),
  // re-feeding the target's rows it lacks with their hidden states. Returns the target's cache
  // rows kept (not re-fed).
  int feed_features(Seq& s);
  // After verification: hands the drafter the rows of the tokens this step committed.
  void observe_step(Seq& s, const ForwardOut& out, size_t row0, int n_before, std::span<const int32_t> path);

  LlamaModel& target_;
  LlamaModel* draft_;
  int first_seq_ = 0;           // KV sequence of slots_[0] (EngineShare::first_seq)
  TurnLock* turns_ = nullptr;   // EngineShare::turns
  int draft_cap_ = -1;
  struct Slot;
  // The slot record of KV sequence `kv_seq` (in the engine's range).
  Slot& slot_of(int kv_seq) const;
  std::vector<std::unique_ptr<Slot>> slots_;     // [capacity]: per-slot drafters (slots_[i] = KV seq first_seq_ + i)
  std::vector<std::unique_ptr<Seq>> seqs_;       // active and finished-but-not-taken
  std::vector<int32_t> group_taps_;              // union of a verification group's taps
  SeqId next_id_ = 1;
};

}  // namespace specchat
