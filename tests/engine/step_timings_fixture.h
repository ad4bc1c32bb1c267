// Made-up step timings for the planner and timing-cache tests (engine/speculative/budget.h).
#pragma once

#include "engine/speculative/budget.h"

namespace specchat::test {

// Draft widths 1..16 at draft_ms · (1 + 0.05 w) ms, verification of 0..64 nodes at
// verify_base_ms + verify_per_node_ms · n ms (the node counts and widths calibrate times).
inline StepTimings linear_timings(double draft_ms, double verify_base_ms, double verify_per_node_ms) {
  StepTimings t;
  t.draft_widths = {1, 2, 4, 8, 16};
  for (int w : t.draft_widths) t.draft_ms.push_back(draft_ms * (1 + 0.05 * w));
  t.verify_nodes = {0, 1, 2, 4, 8, 16, 32, 64};
  for (int n : t.verify_nodes) t.verify_ms.push_back(verify_base_ms + verify_per_node_ms * n);
  return t;
}

}  // namespace specchat::test
