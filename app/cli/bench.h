// `specchat-cli bench`: τ and tokens/s against node budget for chain, dynamic (EAGLE-2) and
// optimal (Sequoia) trees and the n-gram drafter, side by side in one run (issue 3 benchmark).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
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
  int concurrency = 0;                // > 0: aggregate tokens/s of this many sequences at once vs 1
  bool verify_cost = false;           // time k-row target forwards against one row instead
};

void add_bench_options(CLI::App& cmd, BenchOptions& o);

// (kind, text) pairs from a held-out prompts JSON ({"prompts": [{"kind", "text"}]}), story and
// chat prompts alternating, at most max_prompts. Throws std::runtime_error when unreadable.
std::vector<std::pair<std::string, std::string>> load_bench_prompts(const std::string& path, int max_prompts);

// Runs every configuration on every prompt, interleaved per prompt (so machine noise hits all
// alike), checks token identity with the baseline at T = 0, prints a table, and writes the JSON
// report when asked. Returns 0, or 1 when any configuration differed from baseline at T = 0.
int cmd_bench(BenchOptions& o);

// `bench --concurrency N`: the held-out prompts as a queue decoded by one Engine with at most N
// sequences active (continuous batching: one batched target forward per step, a finished
// sequence's slot goes to the next prompt) against the same queue one at a time; two rounds
// each, interleaved; for baseline and the chains of --chain-k. Prints aggregate decode
// tokens/s (all tokens over the wall time of the decode steps, prefill excluded) and the ratio;
// checks that every sequence's tokens equal its one-at-a-time run at T = 0. Returns 0, or 1 on
// a difference.
int cmd_bench_concurrency(BenchOptions& o);

// `bench --verify-cost`: the target alone (--model, default the bundled target) after a prefix
// of min(256, n_ctx / 2) tokens: the median time of a forward of k = 1, 2, 4, …, 64 chain rows
// (all returning logits, as verification does), round robin over k for max(3, --max-prompts)
// repetitions, printed as ms and as the ratio to one row. Returns 0.
int cmd_bench_verify(BenchOptions& o);

}  // namespace specchat::cli
