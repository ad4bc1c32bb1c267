// `specchat-cli calibrate` and the tree planning behind `--tree optimal` / `--tree auto`
// (issue 3; Sequoia, Chen et al. 2024, §3.1 and §3.3).
//
// The calibration of a model pair is a JSON file beside the draft:
// <draft path without .gguf>.calibration.json, holding
//   version, date (UTC, ISO 8601), backend ("cpu"),
//   target / draft: {file, size (bytes), fingerprint (FNV-1a 64 of the first and last 64 KiB)},
//   acceptance: {ranks R, accept_by_rank [R], hits [R], misses, positions, prompts, n},
//   timings: {backend, threads, context_tokens, reps, draft_widths [..], draft_ms [..],
//             verify_nodes [..], verify_ms [..]}   (ms per forward)
// acceptance or timings may be absent (timings alone are cached by `--tree auto`).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/options.h"
#include "engine/model_pair.h"
#include "engine/speculative/budget.h"

namespace specchat::cli {

struct CalibrateOptions {
  std::string model;              // target GGUF; empty = bundled
  std::string draft = "bundled";  // draft GGUF or "bundled"
  std::string prompts;            // held-out prompts JSON; empty = tests/data/heldout_prompts.json
  std::string out;                // calibration file; empty = beside the draft
  int n = 64;                     // target tokens generated per prompt
  int ranks = 8;                  // R: ranks counted (rank ≥ R is a miss)
  int max_prompts = 0;            // 0 = all
  int reps = 9;                   // timed forwards per measurement (median)
  int threads = 0;
  bool json = false;
};

void add_calibrate_options(CLI::App& cmd, CalibrateOptions& o);

// Runs the calibration and writes the file. Returns the exit code (0; errors throw: GgufError,
// ModelError, VocabError from loading, std::runtime_error for prompts/file problems).
int cmd_calibrate(const CalibrateOptions& o);

// "<draft path without .gguf>.calibration.json".
std::string calibration_path(const std::string& draft_path);

// The acceptance vector used when there is no (matching) calibration: a[r] = 0.5 · 0.5^r, r < 8.
std::vector<double> fallback_accept_by_rank();

// Fills req.spec for `--tree optimal` (the Sequoia shape for --node-budget/--depth from the
// pair's calibration) and `--tree auto` (N, D and chain/optimal by choose_budget; timings from
// the calibration, else measured now on the request's prompt and cached in the calibration
// file). Does nothing for other trees, without a draft model, or when req.spec.draft_k is 0.
// Warnings (no calibration, calibration for other files) go to stderr and pair.warnings.
// Returns a JSON description of the plan for --json ("tree_plan"), null when nothing was done.
nlohmann::json plan_tree(const CommonOptions& o, ModelPair& pair, GenerateRequest& req);

}  // namespace specchat::cli
