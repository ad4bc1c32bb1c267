// Draft back-off: suspends drafting for a sequence whose drafts keep failing, so a draft that
// does not match the target (another domain, another fine-tune, random weights) costs little
// more than plain decoding instead of a draft forward per token for nothing.
//
// Rule (deterministic in the accepted counts, so a seeded run repeats itself):
// - after `strikes` consecutive drafted steps that accepted no token, the next `pause` steps
//   decode plainly (no draft);
// - then one drafted step probes, with a single draft token (probing() is true: the cheapest
//   draft that measures acceptance); if it accepts nothing the pause doubles (up to
//   max_pause), otherwise everything resets (strikes count again from zero, the pause from
//   first_pause).
// Skipping or shortening a draft keeps the output the target's: each step's acceptance rule is
// exact on its own (greedy: the target's argmax, so the same tokens; sampled: the target's
// distribution, Leviathan et al. 2023, §2.3, though a given seed's tokens depend on where drafts
// ran, as they do on k), so this is lossless like the rest of the engine. The engine applies it
// to drafters that cost a forward per draft, not to the n-gram drafter (a lookup).
#pragma once

namespace specchat {

class DraftBackoff {
 public:
  // strikes >= 1, 1 <= first_pause <= max_pause (std::invalid_argument otherwise).
  explicit DraftBackoff(int strikes = 4, int first_pause = 8, int max_pause = 256);

  // Asked once per step before drafting: false while a pause runs (the call counts it down).
  bool should_draft();
  // After a step whose draft (non-empty) was verified, with the number of draft tokens the
  // target accepted.
  void drafted_step(int n_accepted);

  // Steps decoded plainly because of a pause so far.
  int suspended_steps() const { return suspended_; }
  // True while a pause runs (the next should_draft() returns false).
  bool paused() const { return pause_left_ > 0; }
  // True when the next drafted step is a probe after a pause: draft one token only.
  bool probing() const { return probe_; }

 private:
  int strikes_, first_pause_, max_pause_;
  int fails_ = 0;        // consecutive drafted steps with nothing accepted
  int pause_left_ = 0;   // plain steps left in the current pause
  int next_pause_;       // length of the next pause
  int suspended_ = 0;
  bool probe_ = false;
};

}  // namespace specchat
