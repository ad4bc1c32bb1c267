// Descriptive statistics and bootstrap confidence intervals of benchmark aggregates.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

namespace specchat::bench {

// Mean, median and tail percentiles of a sample; all 0 (n = 0) for an empty one.
struct Summary {
  int n = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

// The q-th percentile (q in [0, 100]) by linear interpolation between the closest ranks of the
// sorted sample (NumPy's default "linear" method); 0 for an empty sample.
double percentile(std::vector<double> v, double q);
double mean(const std::vector<double>& v);
Summary summarize(const std::vector<double>& v);

// A two-sided 95% interval; lo = hi = the point estimate when the sample has fewer than two items.
struct Interval {
  double lo = 0, hi = 0;
};

// Percentile bootstrap (Efron & Tibshirani 1993, §13.3): `resamples` times, draw n indices in
// [0, n) with replacement from a std::mt19937_64 seeded with `seed`, evaluate `statistic` on
// them, and return the 2.5th and 97.5th percentiles of those values. Deterministic for a seed.
Interval bootstrap_ci(size_t n, const std::function<double(const std::vector<size_t>&)>& statistic, int resamples,
                      uint64_t seed);

nlohmann::json summary_json(const Summary& s);
nlohmann::json interval_json(const Interval& i);

}  // namespace specchat::bench
