// The largest difference between two logit arrays of the same drafter computed two ways (e.g.
// panel and row-major products), against the largest logit.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace specchat::test {

struct LogitDiff {
  double max_abs = 0;    // max |a − b|
  double max_logit = 0;  // max |b|
};

inline LogitDiff logit_diff(const std::vector<float>& a, const std::vector<float>& b) {
  LogitDiff d;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
    d.max_logit = std::max(d.max_logit, static_cast<double>(std::fabs(b[i])));
  }
  return d;
}

// Calls run(true, logits) and run(false, logits) (a drafter loaded with its matrices packed in
// panels, then with SPECCHAT_CPU_PACK=0) and checks that the logits agree up to summation order.
template <class Run>
void check_packed_matches_row_major(Run run) {
  std::vector<float> packed, mapped;
  run(true, packed);
  run(false, mapped);
  REQUIRE(packed.size() == mapped.size());
  const LogitDiff d = logit_diff(packed, mapped);
  INFO("max |packed - row-major| " << d.max_abs << ", max |logit| " << d.max_logit);
  CHECK(d.max_logit > 1.0);
  CHECK(d.max_abs <= 1e-4 * d.max_logit);
}

}  // namespace specchat::test
