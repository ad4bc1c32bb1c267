// DraftLengthPolicy: the draft cap per step from the number of active requests, with hysteresis.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "app/serve/draft_policy.h"

using specchat::serve::DraftLengthPolicy;

TEST_CASE("serve draft policy: full drafts alone, short in the middle, none in a wide batch", "[unit][serve]") {
  DraftLengthPolicy p(1, 4, 2);
  CHECK(p.cap(1) == -1);
  CHECK(p.cap(2) == 2);
  CHECK(p.cap(3) == 2);
  CHECK(p.cap(4) == 0);
  CHECK(p.cap(8) == 0);
  CHECK(p.level() == 2);
}

TEST_CASE("serve draft policy: leaves a level only one request below its threshold", "[unit][serve]") {
  DraftLengthPolicy p(1, 4, 2);
  CHECK(p.cap(4) == 0);
  CHECK(p.cap(3) == 0);   // hovering at the boundary: stays off
  CHECK(p.cap(4) == 0);
  CHECK(p.cap(3) == 0);
  CHECK(p.cap(2) == 2);   // two below: short drafts again
  CHECK(p.cap(3) == 2);
  CHECK(p.cap(1) == -1);  // alone: its own draft at once
  CHECK(p.cap(2) == 2);
  // A jump straight to a wide batch switches drafting off at once.
  CHECK(p.cap(6) == 0);
  // And a drop straight to one request goes back to full drafts.
  CHECK(p.cap(1) == -1);
}

TEST_CASE("serve draft policy: refuses thresholds without a middle level", "[unit][serve]") {
  CHECK_THROWS_AS(DraftLengthPolicy(0, 4, 2), std::invalid_argument);
  CHECK_THROWS_AS(DraftLengthPolicy(2, 3, 2), std::invalid_argument);
  CHECK_THROWS_AS(DraftLengthPolicy(1, 4, 0), std::invalid_argument);
  CHECK_NOTHROW(DraftLengthPolicy(2, 4, 1));
}
