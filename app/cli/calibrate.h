// `specchat-cli calibrate` (issue 3; Sequoia, Chen et al. 2024, §3.1 and §3.3), and the CLI's
// adapter to the tree planning behind `--tree optimal` / `--tree auto`, which lives in
// RequestPlanner::plan_tree (engine/runtime/request_planner.h) for every front end.
//
// The calibration of a model pair is a JSON file beside the draft:
// <draft path without .gguf>.calibration.json, holding
//   version, date (UTC, ISO 8601), backend ("cpu"),
//   target / draft: {file, size (bytes), fingerprint (FNV-1a 64 of the first and last 64 KiB)},
//   acceptance: {ranks R, accept_by_rank [R], hits [R], misses, positions, prompts, n,
//                rank_paths [prompts]: each greedy target token's draft rank, R = a miss, as
//                "0 0 1 0 8" (engine/speculative/rank_paths.h; rank_paths_of)},
//   timings: {backend, threads, context_tokens, reps, draft_widths [..], draft_ms [..],
//             verify_nodes [..], verify_ms [..]}   (ms per forward)
// acceptance or timings may be absent (timings alone are cached by `--tree auto`).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/feature_drafters.h"
#include "app/cli/options.h"
#include "engine/model_pair.h"

namespace specchat::cli {

struct CalibrateOptions {
  std::string model;              // target GGUF; empty = bundled
  std::string draft;  // draft GGUF or "bundled"; empty: as generate (bundled, or picked beside --model)
  std::string prompts;            // held-out prompts JSON; empty = tests/data/heldout_prompts.json
  std::string out;                // calibration file; empty = beside the draft
  int n = 64;                     // target tokens generated per prompt
  int ranks = 8;                  // R: ranks counted (rank ≥ R is a miss)
  int max_prompts = 0;            // 0 = all
  int reps = 9;                   // timed forwards per measurement (median)
  int threads = 0;
  bool json = false;
  // --drafter block|mtp: calibrate a drafter that reads the target's hidden states instead
  // (cmd_calibrate_feature); "model" = the draft model (the default).
  std::string drafter = "model";
  std::string block_drafter;  // --block-drafter FILE ("" = found beside the target)
  std::string mtp;            // --mtp FILE
  int rounds = 2;             // --rounds: passes over the prompts, configurations interleaved
  std::string kv_type = "f16";      // --kv-type (parse_kv_type)
  std::string activations = "q8";   // --activations (parse_activations)
};

void add_calibrate_options(CLI::App& cmd, CalibrateOptions& o);

// The held-out prompts file: `given`, else the bundled heldout_prompts.json (installed beside
// the CLI, or the source tree's tests/data: bundled_data_file). Throws std::runtime_error when
// none is found.
std::string find_prompts_file(const std::string& given);
// Its prompts as ids: {"prompts": [{"kind": "text"|"chat", "text": ...}]} or a plain array of
// strings (raw text); at most max_prompts (0 = all). Throws std::runtime_error when unreadable.
std::vector<std::vector<int32_t>> load_prompts(const ModelPair& pair, const std::string& path, int max_prompts);

// Throws std::runtime_error ("cannot write the calibration to PATH: why") when `path` is a
// folder or its folder does not exist or is not writable: checked before measuring, so a bad
// --out (or a read-only models folder) costs no minutes of measurement.
void check_calibration_output(const std::string& path);

// Why the options given to `calibrate` (`cal`, after parsing into o) contradict each other, or ""
// when they do not: an option of one drafter kind given with the other (--rounds with
// --drafter model; --ranks, --reps or --draft with block/mtp; --block-drafter or --mtp with
// another kind). Such options would be ignored, so main refuses them (exit 2).
std::string refused_calibrate_combination(const CLI::App& cal, const CalibrateOptions& o);

// Throws std::runtime_error naming `path` when no prompt leaves room to generate in a context of
// n_ctx tokens (each needs n_prompt + 1 < n_ctx): said before measuring, not as "no prompt
// produced a token" after it.
void check_prompts_fit(const std::vector<std::vector<int32_t>>& prompts, int n_ctx, const std::string& path);
// Warns on stderr when fewer than kCalibrationMinPositions positions were measured: a few
// dozen tokens give a noisy acceptance vector / tokens-per-second table.
inline constexpr int64_t kCalibrationMinPositions = 256;
void warn_small_sample(int64_t positions, const std::string& what);

// calibrate --json: the calibration written, plus "path" (where) and "seconds" (how long it
// took), as one line on stdout.
void print_calibration_json(const nlohmann::json& cal, const std::string& path, double seconds);

// `specchat-cli calibrate --drafter block|mtp` (engine/speculative/feature_calibration.h):
// greedy speculative decoding with every configuration of feature_calibration_grid on the
// held-out prompts, each prompt run plainly and with every configuration in turn (the order
// rotates per prompt and round, caches cold), o.rounds times. Every run's tokens must equal
// plain decoding's (else std::runtime_error: the drafter is not lossless here). Writes
// {target, drafter, baseline_tokens_per_s, configs [{tree, draft_k, node_budget, depth, branch,
// tau, tokens_per_s}]} beside the drafter file (or to o.out). Returns 0; throws what loading
// and install_feature_drafters throw.
int cmd_calibrate_feature(const CalibrateOptions& o);

// Runs the calibration and writes the file. Returns the exit code (0; errors throw: GgufError,
// ModelError, VocabError from loading, std::runtime_error for prompts/file problems).
int cmd_calibrate(const CalibrateOptions& o);

// Plans req.spec for the pair with RequestPlanner::plan_tree (engine/runtime/request_planner.h:
// optimal trees from the pair's calibration, auto budgets, THE fallback, clamping) from the
// options' settings with req.spec.draft_k (as make_request set it) drafted tokens; does nothing
// when that is 0. Warnings go to stderr and pair.warnings. Returns the plan as JSON for --json
// ("tree_plan") when --tree optimal or auto was asked for, null otherwise. Throws
// std::runtime_error when --tree auto cannot time the models.
// `fd`: the feature drafters installed in the engine (install_feature_drafters).
nlohmann::json plan_tree(const CommonOptions& o, ModelPair& pair, GenerateRequest& req, const FeatureDrafters& fd = {});

}  // namespace specchat::cli
