#include "app/cli/bench/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace specchat::bench {

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double f = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * f;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Summary summarize(const std::vector<double>& v) {
  Summary s;
  s.n = static_cast<int>(v.size());
  s.mean = mean(v);
  s.p50 = percentile(v, 50);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  return s;
}

Interval bootstrap_ci(size_t n, const std::function<double(const std::vector<size_t>&)>& statistic, int resamples,
                      uint64_t seed) {
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), size_t{0});
  const double point = n > 0 ? statistic(idx) : 0;
  if (n < 2 || resamples < 2) return {point, point};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> stats;
  stats.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    for (size_t& i : idx) i = pick(rng);
    stats.push_back(statistic(idx));
  }
  return {percentile(stats, 2.5), percentile(stats, 97.5)};
}

nlohmann::json summary_json(const Summary& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}};
}

nlohmann::json interval_json(const Interval& i) { return {{"lo", i.lo}, {"hi", i.hi}}; }

}  // namespace specchat::bench
