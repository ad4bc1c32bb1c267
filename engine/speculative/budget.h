// Budget choice for speculative steps (issue 3; Sequoia, Chen et al. 2024, §3.3 "hardware-aware
// tree optimizer"): pick the node budget N, the depth D and the shape (chain or the Sequoia
// tree) minimising the expected time per emitted token,
//     (draft time of the tree + t_verify(N)) / E[tokens | N, D],
// from timings measured on the current backend and the acceptance-by-rank vector.
#pragma once

#include <string>
#include <vector>

#include "engine/speculative/drafter.h"
#include "engine/speculative/rank_paths.h"
#include "engine/speculative/sequoia.h"

namespace specchat {

// Measured forward times of one model pair on one backend, in milliseconds.
struct StepTimings {
  // Draft forwards of w tokens (one tree level of width w, logits for every row):
  // draft_widths [n] increasing, ≥ 1; draft_ms [n].
  std::vector<int> draft_widths;
  std::vector<double> draft_ms;
  // Target verification forwards of N + 1 tokens (the last committed token and N tree nodes,
  // logits for every row): verify_nodes [m] increasing, ≥ 0; verify_ms [m].
  std::vector<int> verify_nodes;
  std::vector<double> verify_ms;

  // Both tables present, sizes consistent, keys increasing, times finite and ≥ 0.
  bool valid() const;
  // Piecewise-linear interpolation in the table, linear extrapolation past its ends (from the
  // last two points; constant with one point), never below 0. Require valid().
  double t_draft(double width) const;
  double t_verify(int nodes) const;
};

// Makes both tables non-decreasing in their key: each time becomes the least of itself and the
// times of the larger sizes. A forward of more rows never costs less, so a time above a larger
// size's is noise (a forward preempted or run on cold caches), the kind timings have; lowering
// it to the larger size's keeps the noise from planning (a running maximum from below would
// instead copy one slow small forward to every larger size). Returns the largest ratio by
// which a time exceeded a larger size's before (1 when the tables were non-decreasing). Each
// table is taken in its order as it is (empty tables stay empty); keys are not looked at.
double make_timings_monotone(StepTimings& t);
// A timing table whose times were out of order (a size slower than a larger one) by more than
// this ratio was disturbed by other work on the cores (make_timings_monotone's return): it may
// plan the run that measured it, but is not planned from again (calibration_store.h).
inline constexpr double kTimingNoiseRatio = 1.15;

// Time of one speculative step with this shape (ms): one draft forward per level, the first
// feeding the tokens the previous step committed (`fed_first` tokens, e.g. E[tokens] for
// trees, 1 for chains whose accepted drafts are already cached), level d ≥ 2 feeding the
// nodes of depth d − 1 that have children; plus t_verify(shape.size()). An empty shape costs
// t_verify(0) (plain decoding, no draft forward).
double step_cost_ms(const TreeShape& shape, const StepTimings& t, double fed_first);

struct BudgetChoice {
  TreeMode mode = TreeMode::chain;  // chain (node_budget = depth = draft length) or optimal
  int node_budget = 0;              // N; 0 = no drafting is fastest (plain decoding)
  int depth = 0;                    // D
  TreeShape shape;                  // the tree to draft (a chain shape for mode chain)
  double expected_tokens = 1.0;     // E[tokens | N, D] per step, bonus included
  double step_ms = 0.0;             // modelled time of one step
  double ms_per_token() const { return step_ms / expected_tokens; }
};

// Searches chains of length 1..min(max_nodes, max_depth), Sequoia trees for every
// N ≤ max_nodes and D ≤ min(N, max_depth), and plain decoding, and returns the one with the
// least ms_per_token() (ties: the smaller N, then chain before tree). A Sequoia tree that is a
// chain is reported as mode chain. max_nodes/max_depth are clamped to the planner's bounds.
// With `paths` (the calibration's measured rank paths, engine/speculative/rank_paths.h), chains
// and trees are valued by it instead of the planner's independence model, and the trees are its
// best trees (RankPathModel::best_tree); depth is then also bounded by paths->max_depth().
// Requires t.valid() (throws std::invalid_argument otherwise).
BudgetChoice choose_budget(const SequoiaPlanner& planner, const StepTimings& t, int max_nodes, int max_depth,
                           const RankPathModel* paths = nullptr);

}  // namespace specchat
