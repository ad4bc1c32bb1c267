// `specchat-cli bench`: τ and tokens/s against node budget for chain, dynamic (EAGLE-2) and
// optimal (Sequoia) trees and the n-gram drafter, side by side in one run (issue 3 benchmark).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "app/cli/options.h"

namespace specchat::cli {

struct BenchOptions {
  CommonOptions common;               // model, draft, sampling, -n, threads
  std::string prompts;                // held-out prompts JSON; empty = tests/data/heldout_prompts.json
  int max_prompts = 20;
  std::vector<int> budgets = {4, 8, 16, 32, 64};
  std::vector<int> chain_ks = {1, 2, 3, 4, 6, 8};
  std::string out;                    // optional JSON report path
};

void add_bench_options(CLI::App& cmd, BenchOptions& o);

// Runs every configuration on every prompt, interleaved per prompt (so machine noise hits all
// alike), checks token identity with the baseline at T = 0, prints a table, and writes the JSON
// report when asked. Returns 0, or 1 when any configuration differed from baseline at T = 0.
int cmd_bench(BenchOptions& o);

}  // namespace specchat::cli
