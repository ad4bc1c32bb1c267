// Measurements behind static optimal trees and the budget choice (issue 3; Sequoia, Chen et
// al. 2024, §3.1 acceptance vector and §3.3 hardware-aware optimizer): the draft's
// acceptance-by-rank vector on held-out text, and forward timings of both models.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/speculative/budget.h"

namespace specchat {

class LlamaModel;

// Ranks of the target's greedy tokens in the draft's distribution.
struct RankCounts {
  std::vector<int64_t> hits;  // [R]: positions where the target's token had draft rank r
  int64_t misses = 0;         // positions where it had rank ≥ R
  int64_t positions() const;
  // a[r] = hits[r] / positions() ([R]; all 0 when nothing was counted).
  std::vector<double> accept_by_rank() const;
};

// Rank of token `id` in `logits` ([n_vocab]) ordered by logit, highest first, ties by lower id
// (the order ModelDrafter expands children in): the number of ids ranked before it.
int draft_rank(std::span<const float> logits, int32_t id);

// Feeds ctx ([n] ids, n ≤ draft.n_ctx()) to the draft from an empty cache in chunks of
// max_batch and, for every i in [from, n), counts the draft rank of ctx[i] given ctx[0..i)
// into `counts` (sized to R = counts.hits.size(), R ≤ 127). With `ranks`, also appends each of
// those ranks in order (R for a miss): the sequence RankPathModel reads. 1 ≤ from ≤ n. Leaves
// the draft's cache empty. Throws std::invalid_argument when ctx does not fit or R > 127.
void count_draft_ranks(LlamaModel& draft, std::span<const int32_t> ctx, int from, RankCounts& counts,
                       std::vector<int8_t>* ranks = nullptr);

// Times forwards on the real context ctx ([n] ids, n ≥ 1): the target verifying N tree nodes
// (a forward of N + 1 tokens at slot n − 1, every row's logits) for each N in verify_nodes, and
// (when draft is not null) the draft feeding w tokens for each w in draft_widths (both lists
// increasing). Each model runs one warm-up round over all its sizes, then max(1, reps) rounds
// over all sizes in turn; a size's time is its fastest forward, in ms. When the tables are out
// of order by more than kTimingNoiseRatio, up to two more sets of rounds follow (minima kept).
// The tables are then made non-decreasing (make_timings_monotone: more rows never cost less)
// and *disorder (when given) is set to the last check's ratio (1 = in order; above
// kTimingNoiseRatio = still noisy: use, do not keep). Node counts / widths that do not fit
// (max_batch, n_ctx) are left out, so ctx should leave room for the largest. Both caches are
// left empty. Without a draft, draft_widths/draft_ms are empty (the result is not valid()).
StepTimings measure_step_timings(LlamaModel& target, LlamaModel* draft, std::span<const int32_t> ctx,
                                 const std::vector<int>& verify_nodes, const std::vector<int>& draft_widths,
                                 int reps, double* disorder = nullptr);

}  // namespace specchat
