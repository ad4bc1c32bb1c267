// Calibration of the drafters that read the target's hidden states (the DFlash block drafter
// and the MTP head; docs/design/target-feature-drafters.md), behind `--tree auto` for them.
//
// The model drafter's calibration models a step (Sequoia §3.3: an acceptance-by-rank vector
// and timed forwards). A block drafter's acceptance depends on the block position as much as on
// the rank, and its cost is one forward per block whatever the depth, so that model does not
// carry over. Here the candidates are *measured*: `specchat-cli calibrate --drafter block|mtp`
// runs greedy speculative decoding with each configuration of a small grid (chains of every
// useful length, dynamic trees of a few node budgets from the block's marginals) on held-out
// prompts, interleaved with plain decoding, and records τ and decode tokens/s. `--tree auto`
// then runs the fastest one, or plain decoding when none beats it.
//
// The file lives beside the drafter: "<drafter path without .gguf>.calibration.json":
//   version, date, backend "cpu", kind "block"|"mtp", threads, kv_type, activations, prompts, n,
//   target / drafter: {file, size, fingerprint} (calibration_file_info),
//   baseline_tokens_per_s,
//   configs: [{tree "chain"|"dynamic", draft_k, node_budget, depth, branch, tau, tokens_per_s}],
//   by_setup: [{date, threads, kv_type, activations, prompts, rounds, n, baseline_tokens_per_s,
//               configs, auto_choice}]: one measurement per setup (TimingSetup), the top-level
//   fields being the latest one's.
// It needs nlohmann-json: built with the front-end library like calibration_store.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/runtime/spec_settings.h"
#include "engine/speculative/calibration_store.h"

namespace specchat {

inline constexpr int kFeatureCalibrationVersion = 1;

// One measured configuration.
struct FeatureConfigResult {
  SpecSettings settings;      // drafter, tree (chain | dynamic), draft_k, node_budget, depth, branch
  double tau = 0;             // generated tokens per target forward (decode steps)
  double tokens_per_s = 0;    // decode tokens/s over all prompts
};

// What a feature drafter's calibration offers to plan_tree.
struct FeatureCalibration {
  enum class Status { ok, missing, unreadable, other_files };
  std::string path;
  Status status = Status::missing;
  std::string problem;  // why it cannot be used, without a final period; "" when usable
  double baseline_tokens_per_s = 0;
  int threads = 0;
  TimingSetup measured;                      // the setup of the measurement read
  // Non-empty when no measurement is for the setup asked for, so the latest one is used: says
  // which setup it was made with and how to measure this one (a planning warning).
  std::string setup_note;
  // Non-empty when the user's own calibration (user_calibration_path) is unusable and the one
  // beside the drafter was read instead: why (a planning warning).
  std::string note;
  std::vector<FeatureConfigResult> configs;  // [n] measured, in file order

  bool usable() const { return status == Status::ok && !configs.empty() && baseline_tokens_per_s > 0; }
  // The fastest configuration, or nullptr when none is faster than plain decoding (or none).
  const FeatureConfigResult* best() const;
};

// The configurations `calibrate` measures for `drafter` (block or mtp). Block: chains of
// 1 … B − 1 drafted tokens and dynamic trees (node budgets 8, 12, 16, 24, 32, depth B − 1,
// branch 2 and 3). MTP: chains of 1 … 4 and dynamic trees (budgets 6, 10, 16, depth 4, branch
// 2). block_size: the block drafter's B (≥ 2; ignored for mtp). Throws std::invalid_argument
// for another drafter or B < 2.
std::vector<SpecSettings> feature_calibration_grid(DrafterChoice drafter, int block_size);

// Reads the calibration of `drafter_path` for the target at `target_path`: the measurement made
// with `setup` (threads, KV type, activation rounding), else the latest one with a setup_note.
// Never throws: a missing, unreadable or foreign file is a status and a `problem` naming the fix.
FeatureCalibration load_feature_calibration(const std::string& target_path, const std::string& drafter_path,
                                            DrafterChoice drafter, const TimingSetup& setup);

// The JSON of one configuration result and its inverse (false when malformed, or when a value
// is past the options' limits: kMaxNodeBudget, kMaxDepth, kMaxBranch).
nlohmann::json feature_config_json(const FeatureConfigResult& r);
bool feature_config_from_json(const nlohmann::json& j, DrafterChoice drafter, FeatureConfigResult* out);

}  // namespace specchat
