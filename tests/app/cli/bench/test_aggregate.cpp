#include <catch2/catch.hpp>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/diff.h"

using namespace specchat::bench;

namespace {
RequestRecord rec(const std::string& id, const std::string& cat, const std::string& cfg, double latency, int steps,
                  int out = 10) {
  RequestRecord r;
  r.prompt_id = id;
  r.category = cat;
  r.config = cfg;
  r.latency_ms = latency;
  r.ttft_ms = latency / 10;
  r.output_tokens = out;
  r.tpot_ms = (r.latency_ms - r.ttft_ms) / (out - 1);
  r.steps = steps;
  return r;
}
const GroupAggregate* find(const Aggregates& a, const std::string& cfg, const std::string& group) {
  for (const GroupAggregate& g : a.groups) {
    if (g.config == cfg && g.group == group && g.kind != "tier") return &g;
  }
  return nullptr;
}
}  // namespace

TEST_CASE("aggregate: speedup pairs each request with baseline on the same prompt", "[unit][bench]") {
  BenchRun run;
  run.records = {rec("a", "math", "baseline", 100, 10), rec("b", "math", "baseline", 200, 10),
                 rec("a", "math", "chain:k=4", 50, 4), rec("b", "math", "chain:k=4", 50, 6)};
  const Aggregates a = aggregate(run);
  const GroupAggregate* g = find(a, "chain:k=4", "math");
  REQUIRE(g);
  CHECK(g->speedup.mean == Approx((2.0 + 4.0) / 2));
  CHECK(g->tau == Approx(20.0 / 10.0));
  CHECK(g->speedup_ci.lo >= 2.0);
  CHECK(g->speedup_ci.hi <= 4.0);
  CHECK(g->latency_ms.mean == Approx(50));
  CHECK(find(a, "baseline", "math")->speedup.mean == Approx(1.0));
  // The same records give the same aggregates (seeded bootstrap).
  CHECK(aggregates_json(aggregate(run)) == aggregates_json(a));
}

TEST_CASE("aggregate: a failed baseline leaves its speculative partner unpaired", "[unit][bench]") {
  BenchRun run;
  run.records = {rec("a", "qa", "baseline", 100, 10), rec("a", "qa", "chain:k=4", 50, 4)};
  run.records[0].error = "boom";
  const Aggregates a = aggregate(run);
  CHECK(a.failures == 1);
  CHECK(find(a, "chain:k=4", "qa")->speedup.n == 0);
  CHECK(find(a, "baseline", "qa")->requests == 0);
}

TEST_CASE("aggregate: system tokens/s from the waves", "[unit][bench]") {
  BenchRun run;
  run.waves = {{"baseline", 2, 0, 0, 2, 100, 500}, {"baseline", 2, 0, 1, 2, 100, 500}, {"baseline", 1, 0, 0, 1, 30, 1000}};
  const Aggregates a = aggregate(run);
  REQUIRE(a.system.size() == 2);
  CHECK(a.system[0].concurrency == 2);
  CHECK(a.system[0].tokens_per_s == Approx(200.0));
  CHECK(a.system[1].tokens_per_s == Approx(30.0));
}

TEST_CASE("bench-diff: a real change is significant, noise is not", "[unit][bench]") {
  BenchRun a, b;
  for (int i = 0; i < 12; ++i) {
    const std::string id = "p" + std::to_string(i);
    const double jitter = (i % 3) * 2.0;
    a.records.push_back(rec(id, "coding", "baseline", 100 + jitter, 10));
    b.records.push_back(rec(id, "coding", "baseline", 50 + jitter, 10));  // twice as fast
    a.records.push_back(rec(id, "qa", "baseline", 100 + jitter, 10));
    b.records.push_back(rec(id, "qa", "baseline", 100 + (2 - i % 3) * 2.0, 10));  // same distribution
  }
  const auto rows = diff_runs(a, b);
  bool saw_coding = false, saw_qa = false;
  for (const DiffRow& d : rows) {
    if (d.group == "coding") {
      saw_coding = true;
      CHECK(d.change > 0.9);
      CHECK(d.significant);
    }
    if (d.group == "qa") {
      saw_qa = true;
      CHECK(std::abs(d.change) < 0.05);
      CHECK_FALSE(d.significant);
    }
  }
  CHECK(saw_coding);
  CHECK(saw_qa);
  CHECK(diff_table(rows).find("coding") != std::string::npos);
}

TEST_CASE("aggregate: rows are listed group by group, configurations in the run's order", "[unit][bench]") {
  // Regression: configurations rotate from wave to wave, and listing groups by first appearance
  // put baseline first in one category and last in the next.
  BenchRun run;
  run.records = {rec("a", "coding", "baseline", 100, 10), rec("a", "coding", "chain:k=4", 50, 4),
                 rec("b", "humanities", "chain:k=4", 60, 4), rec("b", "humanities", "baseline", 90, 10)};
  const Aggregates a = aggregate(run);
  std::vector<std::string> rows;
  for (const GroupAggregate& g : a.groups) rows.push_back(g.kind + ":" + g.group + ":" + g.config);
  const std::vector<std::string> want = {"all:all:baseline", "all:all:chain:k=4", "category:coding:baseline",
                                         "category:coding:chain:k=4", "category:humanities:baseline",
                                         "category:humanities:chain:k=4"};
  CHECK(rows == want);
}
