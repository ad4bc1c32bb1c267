// DraftBackoff (engine/speculative/draft_backoff.h): strikes, pauses that double up to the cap,
// a reset on any accepted token, and the argument checks.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "engine/speculative/draft_backoff.h"

using namespace specchat;

namespace {

// Drives b for n steps where every drafted step accepts `accept(step)`; returns 1 for a drafted
// step, 0 for a paused one.
template <class F>
std::vector<int> run(DraftBackoff& b, int n, F accept) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    const bool d = b.should_draft();
    out.push_back(d ? 1 : 0);
    if (d) b.drafted_step(accept(i));
  }
  return out;
}

}  // namespace

TEST_CASE("DraftBackoff: failing drafts pause drafting, each failed probe doubles the pause", "[unit][spec]") {
  DraftBackoff b(3, 2, 8);
  const std::vector<int> got = run(b, 30, [](int) { return 0; });
  // 3 strikes, pause 2, probe, pause 4, probe, pause 8, probe, pause 8 (the cap), ...
  const std::vector<int> want = {1, 1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0};
  CHECK(got == want);
  CHECK(b.suspended_steps() == 23);
  CHECK(b.paused());
  // Probes are flagged (one draft token), the first strikes are not.
  DraftBackoff p(2, 1, 4);
  CHECK_FALSE(p.probing());
  p.drafted_step(0);
  CHECK_FALSE(p.probing());
  p.drafted_step(0);  // second strike: pause of 1, then a probe
  CHECK(p.probing());
  CHECK_FALSE(p.should_draft());
  CHECK(p.should_draft());
  CHECK(p.probing());
  p.drafted_step(1);  // the probe accepted: reset
  CHECK_FALSE(p.probing());
}

TEST_CASE("DraftBackoff: an accepted token resets the strikes and the pause length", "[unit][spec]") {
  DraftBackoff b(2, 2, 16);
  // Fail, fail (pause 2), probe fails (pause 4), probe accepts: reset.
  std::vector<int> got = run(b, 10, [](int i) { return i == 9 ? 1 : 0; });
  CHECK(got == std::vector<int>{1, 1, 0, 0, 1, 0, 0, 0, 0, 1});
  CHECK_FALSE(b.paused());
  // After the reset it takes 2 failures again, and the pause is back to 2.
  got = run(b, 5, [](int) { return 0; });
  CHECK(got == std::vector<int>{1, 1, 0, 0, 1});
  // A draft that keeps accepting is never paused.
  DraftBackoff good;
  CHECK(run(good, 100, [](int i) { return i % 3; }) == std::vector<int>(100, 1));
  CHECK(good.suspended_steps() == 0);
}

TEST_CASE("DraftBackoff: bad settings are refused", "[unit][spec]") {
  CHECK_THROWS_AS(DraftBackoff(0, 2, 8), std::invalid_argument);
  CHECK_THROWS_AS(DraftBackoff(2, 0, 8), std::invalid_argument);
  CHECK_THROWS_AS(DraftBackoff(2, 9, 8), std::invalid_argument);
}
