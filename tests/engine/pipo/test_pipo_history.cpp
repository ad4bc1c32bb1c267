// Latent-format history (docs/design/pipo.md): the next PIPO turn continues the stored pair
// sequence, never the raw ids re-paired, and a switch between modes or releases re-prefills
// with a note.
#include <catch2/catch.hpp>

#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_io.h"

using namespace specchat;

namespace {
constexpr int32_t P = kPipoPad;
}

TEST_CASE("pipo history: the next turn continues the stored pairs", "[unit][pipo]") {
  // Prompt (5 ids: one PAD), a reply with a dropped token 2 in the middle.
  const std::vector<int32_t> history = {1, 3, 10, 11, 4, P, 20, P, 21, 22, 6, P};
  CHECK(pairs_to_raw(history) == std::vector<int32_t>{1, 3, 10, 11, 4, 20, 21, 22, 6});
  std::vector<int32_t> full = pairs_to_raw(history);
  full.insert(full.end(), {3, 30, 31, 4});  // the next user turn and the assistant header
  const auto c = continue_pairs(history, full);
  REQUIRE(c);
  std::vector<int32_t> want = history;
  want.insert(want.end(), {3, 30, 31, 4});
  CHECK(*c == want);
  // Odd new segment: aligned on its own, the history's pairs untouched.
  full.push_back(9);
  want.insert(want.end(), {9, P});
  CHECK(*continue_pairs(history, full) == want);
  // Re-pairing the raw ids would have given other pairs: (4, 20) is not (4, PAD), (20, PAD).
  CHECK(pair_align_ids(full) != want);
}

TEST_CASE("pipo history: edits, other releases and lossless turns re-prefill, and say so", "[unit][pipo]") {
  const std::vector<int32_t> history = {1, 3, 10, 11, 4, P, 20, 21};
  const std::vector<int32_t> edited = {1, 3, 10, 12, 4, 20, 21, 3};
  CHECK_FALSE(continue_pairs(history, edited));
  CHECK_FALSE(continue_pairs(history, std::vector<int32_t>{1, 3}));  // shorter than the history
  const std::vector<int32_t> full = {1, 3, 10, 11, 4, 20, 21, 3, 5};
  PipoContinuation c = plan_pipo_turn(&history, "r1", false, "r1", full);
  CHECK(c.from_latents);
  CHECK(c.note.empty());
  c = plan_pipo_turn(&history, "r1", false, "r2", full);
  CHECK_FALSE(c.from_latents);
  CHECK(c.note.find("'r1'") != std::string::npos);
  CHECK(c.pairs == pair_align_ids(full));
  c = plan_pipo_turn(&history, "r1", true, "r1", full);
  CHECK_FALSE(c.from_latents);
  CHECK(c.note.find("lossless") != std::string::npos);
  c = plan_pipo_turn(&history, "r1", false, "r1", edited);
  CHECK_FALSE(c.from_latents);
  CHECK(c.note.find("changed") != std::string::npos);
  c = plan_pipo_turn(nullptr, "", false, "r1", full);  // a first turn: nothing to say
  CHECK(c.note.empty());
  CHECK(c.pairs == pair_align_ids(full));
  c = plan_pipo_turn(nullptr, "", true, "r1", full);   // earlier replies were lossless
  CHECK(c.note.find("lossless") != std::string::npos);
}

TEST_CASE("pipo history: a reply cut by a stop string keeps the whole pairs of its kept tokens", "[unit][pipo]") {
  const std::vector<int32_t> reply = {20, P, 21, 22, 23, 24, 25, P};  // raw 20 21 22 23 24 25
  CHECK(kept_reply_pairs(reply, 6) == reply);
  CHECK(kept_reply_pairs(reply, 5) == std::vector<int32_t>{20, P, 21, 22, 23, 24});
  // Token 2 of (23, 24) cut: the pair goes, 23 follows as raw text.
  CHECK(kept_reply_pairs(reply, 4) == std::vector<int32_t>{20, P, 21, 22});
  CHECK(kept_reply_pairs(reply, 2) == std::vector<int32_t>{20, P});
  CHECK(kept_reply_pairs(reply, 0).empty());
  // The next turn continues them: 23 and the closing tokens are paired as new input.
  const std::vector<int32_t> prompt = {1, 3};
  std::vector<int32_t> history = prompt;
  const std::vector<int32_t> kept = kept_reply_pairs(reply, 4);
  history.insert(history.end(), kept.begin(), kept.end());
  const std::vector<int32_t> full = {1, 3, 20, 21, 22, 23, 9, 3, 30};
  const auto c = continue_pairs(history, full);
  REQUIRE(c);
  CHECK(*c == std::vector<int32_t>{1, 3, 20, P, 21, 22, 23, 9, 3, 30});
}
