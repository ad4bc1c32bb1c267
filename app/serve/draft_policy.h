// Draft length from the batch size, with hysteresis (issue 14: the speculative speedup must not
// fall below 1 as concurrency grows).
//
// Why: all active requests share one target forward per step. With one request a draft of k
// rows costs little more than the one-row decode (the weights are read once), but with n active
// requests every draft row is one more row of an already wide batch, so the verify cost grows
// ~linearly while the expected acceptance per row stays the same. Measured on 2 CPU cores with
// the bundled pair: 1.02x at 1 request, 0.95x at 2, 0.82x at 4 and 0.79x at 8 with uncapped
// drafts (scripts/bench-serve, under load). So: each request's own draft while few requests run,
// a short draft (2 nodes) in the middle, none (plain decoding steps, 1.0x) in a wide batch.
//
// Hysteresis: a shorter level is entered as soon as the count of active requests reaches it;
// the off level is left only when the count has dropped one below its threshold, so a batch
// that hovers at that boundary (a request finishing and the next one being admitted) does not
// flip every step. At most full_max active requests always get their own drafts.
#pragma once

namespace specchat::serve {

class DraftLengthPolicy {
 public:
  // full_max: most active requests that still get their own draft (≥ 1);
  // off_at: active requests from which drafting stops (> full_max + 1; in between: short drafts
  // of `short_nodes` nodes). std::invalid_argument otherwise.
  explicit DraftLengthPolicy(int full_max = 1, int off_at = 4, int short_nodes = 2);

  // The Engine::set_draft_cap value for this step: -1 (no cap), short_nodes, or 0.
  int cap(int n_active);

  // 0 = full drafts, 1 = short, 2 = off (the current level, for logs and metrics).
  int level() const { return level_; }

 private:
  int level_for(int n_active) const;
  int full_max_, off_at_, short_nodes_;
  int level_ = 0;
};

}  // namespace specchat::serve
