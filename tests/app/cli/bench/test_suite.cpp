#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "app/cli/bench/suite.h"

using namespace specchat::bench;
using nlohmann::json;

namespace {
const std::string kDir = std::string(SPECCHAT_SOURCE_DIR) + "/resources/bench/";
json one_prompt(json p) {
  return {{"format", "specchat-bench-suite"}, {"version", 1}, {"prompts", json::array({p})}};
}
}  // namespace

TEST_CASE("qualitative suite: 11 SPEED-Bench categories with at least 12 prompts each", "[unit][bench]") {
  const BenchSuite s = load_suite(kDir + "qualitative.json");
  CHECK(s.prompt_format == "chat");
  std::map<std::string, int> n;
  for (const BenchPrompt& p : s.prompts) {
    ++n[p.category];
    CHECK(p.turns.size() == 1);
    CHECK(p.tier.empty());
  }
  const std::set<std::string> want = {"coding", "humanities", "math", "multilingual", "qa", "rag",
                                      "reasoning", "roleplay", "stem", "summarization", "writing"};
  CHECK(n.size() == want.size());
  for (const std::string& c : want) {
    INFO(c);
    CHECK(n[c] >= 12);
  }
  // Round trip.
  CHECK(suite_to_json(parse_suite(suite_to_json(s), "x")) == suite_to_json(s));
  // The tiny CI subset: 2 per category.
  CHECK(first_per_group(s, 2).prompts.size() == 22);
}

TEST_CASE("throughput suite: every tier x bucket, text and ids", "[unit][bench]") {
  const BenchSuite s = load_suite(kDir + "throughput.json");
  CHECK(s.prompt_format == "raw");
  std::map<std::string, int> cells;
  for (const BenchPrompt& p : s.prompts) {
    CHECK(!p.tier.empty());
    CHECK(p.bucket > 0);
    CHECK(!p.input_ids.empty());
    ++cells[prompt_group(p)];
  }
  for (const std::string& t : entropy_tiers()) {
    for (int b : {128, 256, 512, 768}) {
      INFO(t << "/" << b);
      CHECK(cells[t + "/" + std::to_string(b)] >= 2);
    }
  }
}

TEST_CASE("suite schema: clear errors for broken files", "[unit][bench]") {
  const json good = {{"id", "a"}, {"category", "qa"}, {"turns", {"hi"}}, {"source", "me"}};
  CHECK_NOTHROW(parse_suite(one_prompt(good), "t"));
  auto fails_with = [](const json& doc, const std::string& part) {
    try {
      parse_suite(doc, "t.json");
    } catch (const SuiteError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(part) != std::string::npos);
      return;
    }
    FAIL("no SuiteError for " << doc.dump());
  };
  json bad = good;
  bad.erase("source");
  fails_with(one_prompt(bad), "missing field 'source'");
  bad = good;
  bad["turns"] = json::array();
  fails_with(one_prompt(bad), "turns");
  bad = good;
  bad["turns"] = {"one", "two"};
  fails_with(one_prompt(bad), "multi-turn");
  bad = good;
  bad["tier"] = "medium";
  fails_with(one_prompt(bad), "tier");
  bad = good;
  bad["bucket"] = -3;
  fails_with(one_prompt(bad), "bucket");
  bad = good;
  bad["input_ids"] = {1, -2};
  fails_with(one_prompt(bad), "input_ids");
  json dup = one_prompt(good);
  dup["prompts"].push_back(good);
  fails_with(dup, "duplicate id");
  json v2 = one_prompt(good);
  v2["version"] = 2;
  fails_with(v2, "version");
  fails_with(json::array(), "JSON object");
  CHECK_THROWS_AS(load_suite(kDir + "no-such-suite.json"), SuiteError);
}
