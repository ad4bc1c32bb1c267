// `specchat-cli bench-diff A.json B.json`: two runs side by side, per configuration ×
// concurrency × category (and all requests): output tokens/s per user in A and B, the relative
// change with a bootstrap 95% CI on the ratio of the means (each run resampled on its own), and
// whether the interval excludes 0 (significant); τ and speedup of A and B beside it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/records.h"

namespace specchat::bench {

struct DiffRow {
  std::string config;
  int concurrency = 1;
  std::string group;  // "all" or a category
  int n_a = 0, n_b = 0;
  double tps_a = 0, tps_b = 0;  // mean output tokens/s per user (non-failed requests)
  double change = 0;            // tps_b / tps_a - 1
  Interval change_ci;
  bool significant = false;     // change_ci excludes 0
  double tau_a = 0, tau_b = 0, speedup_a = 0, speedup_b = 0;
};

// Rows for every (config, concurrency, group) present in both runs, in A's order.
std::vector<DiffRow> diff_runs(const BenchRun& a, const BenchRun& b, const AggregateOptions& opt = {});
// A fixed-width text table of the rows, significant changes marked with '*'.
std::string diff_table(const std::vector<DiffRow>& rows);
nlohmann::json diff_json(const std::vector<DiffRow>& rows);

}  // namespace specchat::bench
