#include <catch2/catch.hpp>

#include "app/cli/bench/configs.h"

using namespace specchat;
using namespace specchat::bench;

TEST_CASE("configs: families, keys, canonical names, baseline first", "[unit][bench]") {
  const auto cs = parse_configs("chain:k=4,dynamic:n=16:d=5:b=3,baseline,optimal:n=8,ngram:k=3");
  REQUIRE(cs.size() == 5);
  CHECK(cs[0].name == "baseline");
  CHECK(cs[0].settings.drafter == DrafterChoice::none);
  CHECK(cs[1].name == "chain:k=4");
  CHECK(cs[1].settings.draft_k == 4);
  CHECK(cs[1].settings.tree == TreeMode::chain);
  CHECK(cs[2].name == "dynamic:n=16:d=5:b=3");
  CHECK(cs[2].settings.tree == TreeMode::dynamic);
  CHECK(cs[3].name == "optimal:n=8:d=" + std::to_string(SpecSettings{}.depth));
  CHECK(cs[4].settings.drafter == DrafterChoice::ngram);
  CHECK(parse_configs("chain:k=2").front().baseline());  // baseline added when absent
  // The drafters that read the target's hidden states.
  const auto fs = parse_configs("block:k=7,block-tree:n=16:d=7:b=3,mtp:k=2,mtp-tree:n=10:d=4:b=2");
  REQUIRE(fs.size() == 5);
  CHECK(fs[1].name == "block:k=7");
  CHECK(fs[1].settings.drafter == DrafterChoice::block);
  CHECK(fs[1].settings.tree == TreeMode::chain);
  CHECK(fs[2].name == "block-tree:n=16:d=7:b=3");
  CHECK(fs[2].settings.drafter == DrafterChoice::block);
  CHECK(fs[2].settings.tree == TreeMode::dynamic);
  CHECK(fs[2].settings.node_budget == 16);
  CHECK(fs[3].settings.drafter == DrafterChoice::mtp);
  CHECK(fs[3].settings.draft_k == 2);
  CHECK(fs[4].name == "mtp-tree:n=10:d=4:b=2");
  CHECK_THROWS_AS(parse_config("block:n=4"), ConfigError);
  CHECK_THROWS_AS(parse_config("mtp-tree:k=2"), ConfigError);
}

TEST_CASE("configs: bad text is refused with a message", "[unit][bench]") {
  CHECK_THROWS_AS(parse_config("beam:k=4"), ConfigError);
  CHECK_THROWS_AS(parse_config("chain:k=0"), ConfigError);
  CHECK_THROWS_AS(parse_config("chain:k=four"), ConfigError);
  CHECK_THROWS_AS(parse_config("chain:n=4"), ConfigError);
  CHECK_THROWS_AS(parse_config("chain:k=4:k=5"), ConfigError);
  CHECK_THROWS_AS(parse_config("dynamic:n=200"), ConfigError);
  CHECK_THROWS_AS(parse_config("baseline:k=1"), ConfigError);
  CHECK_THROWS_AS(parse_configs("chain:k=4,chain:k=4"), ConfigError);
  CHECK_THROWS_AS(parse_configs(""), ConfigError);
  try {
    parse_config("chain:k=99");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("1..64") != std::string::npos);
  }
}

TEST_CASE("configs: pipo is an approximate configuration with a threshold", "[unit][bench][pipo]") {
  const auto cs = parse_configs("baseline,pipo:t=0.85,pipo:t=1");
  REQUIRE(cs.size() == 3);
  CHECK_FALSE(cs[0].approximate());
  CHECK(cs[1].name == "pipo:t=0.85");
  CHECK(cs[1].approximate());
  CHECK(cs[1].pipo_threshold == Approx(0.85f));
  CHECK(cs[1].settings.draft_k == 0);
  CHECK(cs[2].name == "pipo:t=1.00");
  CHECK_THROWS_AS(parse_config("pipo"), ConfigError);
  CHECK_THROWS_AS(parse_config("pipo:t=1.5"), ConfigError);
  CHECK_THROWS_AS(parse_config("pipo:t=x"), ConfigError);
  CHECK_THROWS_AS(parse_config("pipo:k=4"), ConfigError);
  CHECK_THROWS_AS(parse_configs("pipo:t=0.5,pipo:t=0.50"), ConfigError);  // the same configuration
}
