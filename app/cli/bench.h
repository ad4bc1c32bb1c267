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
  bool profile = false;               // time split per operation of decode and verification instead
  int profile_k = 3;                  // --profile: the draft-model chain whose verification is profiled
  // Suite mode (--suite; issue 15, bench_suite.cpp):
  std::string suite;                  // suite file, or "qualitative" / "throughput" (resources/bench)
  std::vector<int> concurrency_list;  // --concurrency 1,2,4,8 (without --suite: one value, as above)
  std::string configs = "baseline,chain:k=4";
  int repeat = 1;
  double max_time = 0;                // seconds; 0 = no limit
  int per_group = 0;                  // > 0: only the first N prompts of each category / tier × bucket
  std::string report;                 // directory for report.json, per_request.csv, summary.csv, report.html
  uint64_t bootstrap_seed = 1;
};

// `specchat-cli bench-diff A.json B.json [--json]`.
struct BenchDiffOptions {
  std::string a, b;
  bool json = false;
  uint64_t seed = 1;
};

// `specchat-cli bench-suite`: writes the throughput suite (throughput_gen.h) for a model.
struct BenchSuiteGenOptions {
  std::string model;                  // target GGUF whose tokenizer counts; empty = bundled
  std::vector<int> buckets;           // empty = default_buckets(n_ctx)
  int per_cell = 4;
  std::string out;
};

void add_bench_options(CLI::App& cmd, BenchOptions& o);
void add_bench_diff_options(CLI::App& cmd, BenchDiffOptions& o);
void add_bench_suite_gen_options(CLI::App& cmd, BenchSuiteGenOptions& o);

// (kind, text) pairs from a held-out prompts JSON ({"prompts": [{"kind", "text"}]}), story and
// chat prompts alternating, at most max_prompts. Throws std::runtime_error when unreadable.
std::vector<std::pair<std::string, std::string>> load_bench_prompts(const std::string& path, int max_prompts);

// Runs every configuration on every prompt, interleaved per prompt (so machine noise hits all
// alike), checks token identity with the baseline at T = 0, prints a table, and writes the JSON
// report when asked. Returns 0, or 1 when any configuration differed from baseline at T = 0.
// Why the options given to `bench` (after parsing into o) contradict each other, or "" when they
// do not: --suite with --profile/--verify-cost, --endpoint or several --concurrency levels
// without --suite, --profile with --verify-cost/--concurrency, and options of the default run
// (--budgets, --chain-k, --draft) in a mode that ignores them. main refuses them (exit 2).
std::string refused_bench_combination(const CLI::App& bench, const BenchOptions& o);
int cmd_bench(BenchOptions& o);

// `bench --suite FILE`: every prompt × --configs × --concurrency levels × --repeat on one Engine
// (bench/runner.h), a progress bar with ETA on a terminal, the per-category summary on stdout,
// and with --report DIR the reports (bench/report_files.h, bench/report_html.h). Greedy only.
// Returns 0, or 1 when any speculative output differed from baseline or a request failed (the
// reports are written all the same, the failures listed).
int cmd_bench_suite(BenchOptions& o);
// Prints the per-category changes between two report.json files. Returns 0; throws
// std::runtime_error for an unreadable report.
int cmd_bench_diff(const BenchDiffOptions& o);
// Writes the throughput suite. Returns 0.
int cmd_bench_suite_gen(const BenchSuiteGenOptions& o);

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

// `bench --profile` (issue 10 §5): the bundled pair (or --model/--draft) decodes the first
// min(--max-prompts, 12) held-out prompts, cold, once as plain decoding (one target row per step)
// and once verifying a draft-model chain of --profile-k; prefill is not counted. Prints per mode
// the time of each target operation (matmul by shape, attention, norms, RoPE, K/V writes, ...),
// the forward glue, the draft model, sampling and acceptance and the engine's overhead, as ms and
// as a share of decoding time (`--out` also writes them as JSON). std::runtime_error on a backend
// that cannot be profiled (CUDA). Returns 0.
int cmd_bench_profile(BenchOptions& o);

}  // namespace specchat::cli
