// Shared stand-ins for the tree-planning tests (test_plan_tree.cpp, test_request_planner.cpp): a
// PlanContext with a draft model and no calibration, a measured-looking acceptance vector and
// linear step timings. No models.
#pragma once

#include <string>
#include <vector>

#include "engine/runtime/request_planner.h"
#include "engine/step_timings_fixture.h"

namespace specchat::test {

// draft_ms per draft forward of any width; verify_base_ms + verify_per_node_ms · N per
// verification of N nodes.
inline StepTimings timings(double draft_ms, double verify_base_ms, double verify_per_node_ms) {
  return linear_timings(draft_ms, verify_base_ms, verify_per_node_ms);
}

// A pair with a draft model, max_nodes nodes per verification and no calibration file.
inline PlanContext with_draft(int max_nodes = 127) {
  PlanContext c;
  c.has_draft_model = true;
  c.max_nodes = max_nodes;
  c.calibration.path = "/nowhere/d.calibration.json";
  c.calibration.status = Calibration::Status::missing;
  c.calibration.problem = "no calibration at /nowhere/d.calibration.json (run `specchat-cli calibrate`)";
  return c;
}

// An acceptance-by-rank vector like the bundled pair's.
inline const std::vector<double> kMeasured = {0.77, 0.15, 0.04, 0.016, 0.007};

// with_draft() with a usable calibration: kMeasured and these rank paths (R = 5: rank 5 is a miss).
inline PlanContext with_calibration(std::vector<std::vector<int8_t>> rank_paths = {}) {
  PlanContext c = with_draft();
  c.calibration.status = Calibration::Status::ok;
  c.calibration.problem.clear();
  c.calibration.accept_by_rank = kMeasured;
  c.calibration.rank_paths = std::move(rank_paths);
  return c;
}

// Settings asking for an optimal tree of `nodes` nodes at most `depth` deep.
inline SpecSettings optimal_tree(int nodes, int depth) {
  SpecSettings s;
  s.tree = TreeMode::optimal;
  s.node_budget = nodes;
  s.depth = depth;
  return s;
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace specchat::test
