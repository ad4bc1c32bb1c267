#include <catch2/catch.hpp>

#include "app/cli/bench/progress.h"
#include "app/cli/bench/records.h"
#include "app/cli/bench/stats.h"

using namespace specchat::bench;

TEST_CASE("stats: percentiles interpolate linearly between ranks (NumPy's default)", "[unit][bench]") {
  const std::vector<double> v = {4, 1, 3, 2};
  CHECK(percentile(v, 50) == Approx(2.5));
  CHECK(percentile(v, 90) == Approx(3.7));
  CHECK(percentile(v, 0) == Approx(1));
  CHECK(percentile(v, 100) == Approx(4));
  CHECK(percentile({}, 50) == 0);
  const Summary s = summarize({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  CHECK(s.n == 10);
  CHECK(s.mean == Approx(5.5));
  CHECK(s.p99 == Approx(9.91));
}

TEST_CASE("stats: bootstrap CI is seeded, holds the estimate and narrows with more data", "[unit][bench]") {
  std::vector<double> small, big;
  for (int i = 0; i < 10; ++i) small.push_back(i % 5);
  for (int i = 0; i < 400; ++i) big.push_back(i % 5);
  auto mean_of = [](const std::vector<double>& v) {
    return [&v](const std::vector<size_t>& idx) {
      double s = 0;
      for (size_t i : idx) s += v[i];
      return s / static_cast<double>(idx.size());
    };
  };
  const Interval a = bootstrap_ci(small.size(), mean_of(small), 1000, 42);
  const Interval b = bootstrap_ci(small.size(), mean_of(small), 1000, 42);
  const Interval c = bootstrap_ci(big.size(), mean_of(big), 1000, 42);
  CHECK(a.lo == b.lo);
  CHECK(a.hi == b.hi);
  CHECK(a.lo < 2.0);
  CHECK(a.hi > 2.0);
  CHECK(c.hi - c.lo < (a.hi - a.lo) / 3);
  const Interval one = bootstrap_ci(1, mean_of(small), 1000, 1);
  CHECK(one.lo == one.hi);
}

TEST_CASE("records: accept lengths from drafted flags, hash of ids", "[unit][bench]") {
  // Steps: [d d t] [t] [d t] [d d] (the last cut by max_tokens).
  CHECK(accept_lengths_from_flags({1, 1, 0, 0, 1, 0, 1, 1}) == std::vector<int>{2, 0, 1, 2});
  CHECK(accept_lengths_from_flags({}).empty());
  // PIPO: [t d] [t] [t d] [t].
  CHECK(accept_lengths_from_flags({0, 1, 0, 0, 1, 0}, DraftOrder::token_then_draft) == std::vector<int>{1, 0, 1, 0});
  CHECK(token_hash({1, 2, 3}) != token_hash({1, 2, 4}));
  CHECK(token_hash({1, 2, 3}).size() == 16);
}

TEST_CASE("progress line: bar, counts and ETA", "[unit][bench]") {
  CHECK(progress_line(0, 10, 0, 10) == "[..........]    0/10   0%  elapsed 0:00  ETA --:--");
  CHECK(progress_line(5, 10, 30, 10) == "[#####.....]    5/10  50%  elapsed 0:30  ETA 0:30");
  CHECK(progress_line(10, 10, 3725, 10) == "[##########]   10/10 100%  elapsed 1:02:05  ETA 0:00");
}
