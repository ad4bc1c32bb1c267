#include <catch2/catch.hpp>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/configs.h"
#include "app/cli/bench/runner.h"
#include "fake_backend.h"

using namespace specchat;
using namespace specchat::bench;

namespace {
RunOptions opts(std::vector<int> conc) {
  RunOptions o;
  o.concurrency = std::move(conc);
  o.configs = parse_configs("baseline,chain:k=4");
  o.max_tokens = 12;
  return o;
}
const GroupAggregate& group(const Aggregates& a, const std::string& cfg, int conc, const std::string& g) {
  for (const GroupAggregate& x : a.groups) {
    if (x.config == cfg && x.concurrency == conc && x.group == g && (x.kind == "category" || x.kind == "all")) return x;
  }
  FAIL("no group " << cfg << " " << conc << " " << g);
  throw;
}
}  // namespace

TEST_CASE("runner: every prompt x config x concurrency, waves of c, identical outputs pass", "[unit][bench]") {
  test::FakeBackend be;
  const BenchSuite s = test::fake_suite({"coding", "math"}, 3);
  long last_done = 0, last_total = 0;
  const BenchRun run = run_suite(be, s, opts({1, 2}), [&](long d, long t, double) {
    CHECK(d > last_done);
    last_done = d;
    last_total = t;
  });
  REQUIRE(run.records.size() == 6 * 2 * 2);
  CHECK(last_done == 24);
  CHECK(last_total == 24);
  CHECK(be.max_active_seen == 2);
  for (const RequestRecord& r : run.records) {
    CHECK_FALSE(r.failed());
    CHECK(r.output_tokens == 12);
    CHECK(r.latency_ms >= r.ttft_ms);
  }
  // Waves: 6 prompts at c = 1 -> 6 waves, at c = 2 -> 3 waves, each for both configs.
  CHECK(run.waves.size() == (6 + 3) * 2);
  const Aggregates a = aggregate(run);
  CHECK(a.failures == 0);
  // chain:k=4 with 2 accepted per step: steps emit 3 tokens, 12 tokens -> 4 steps, τ = 3.
  CHECK(group(a, "chain:k=4", 1, "coding").tau == Approx(3.0));
  CHECK(group(a, "chain:k=4", 1, "coding").alpha == Approx(8.0 / 16.0));
  CHECK(group(a, "baseline", 1, "all").tau == Approx(1.0));
  // Acceptance by position: positions 1 and 2 always accepted, 3 never.
  const auto& pa = group(a, "chain:k=4", 2, "all").position_acceptance;
  REQUIRE(pa.size() == 4);
  CHECK(pa[0] == Approx(1.0));
  CHECK(pa[1] == Approx(1.0));
  CHECK(pa[2] == Approx(0.0));
}

TEST_CASE("runner: a speculative output that differs from baseline is a failure, not averaged in", "[unit][bench]") {
  test::FakeBackend be;
  be.accept_per_step = 3;
  const BenchSuite s = test::fake_suite({"coding"}, 4);
  // The deliberately mismatched fake: coding-2's prompt ("coding prompt xx" + BOS = 17 ids).
  be.mismatch_prompt_len = 17;
  be.mismatch_at = 5;
  const BenchRun run = run_suite(be, s, opts({1}), {});
  int failed = 0;
  for (const RequestRecord& r : run.records) {
    if (!r.failed()) continue;
    ++failed;
    CHECK(r.prompt_id == "coding-2");
    CHECK(r.config == "chain:k=4");
    CHECK(r.first_diff == 5);
    CHECK_FALSE(r.identical);
  }
  CHECK(failed == 1);
  const Aggregates a = aggregate(run);
  CHECK(a.failures == 1);
  const GroupAggregate& g = group(a, "chain:k=4", 1, "coding");
  CHECK(g.requests == 3);
  CHECK(g.failures == 1);
  CHECK(g.speedup.n == 3);
  CHECK(group(a, "baseline", 1, "coding").requests == 4);
}

TEST_CASE("runner: bad options are refused, max_time stops between waves", "[unit][bench]") {
  test::FakeBackend be;
  be.cap = 2;
  const BenchSuite s = test::fake_suite({"qa"}, 4);
  CHECK_THROWS_AS(run_suite(be, s, opts({4}), {}), std::invalid_argument);
  RunOptions o = opts({1});
  o.repeat = 0;
  CHECK_THROWS_AS(run_suite(be, s, o, {}), std::invalid_argument);
  o = opts({1});
  o.configs.erase(o.configs.begin());
  CHECK_THROWS_AS(run_suite(be, s, o, {}), std::invalid_argument);
  std::atomic<bool> cancel{true};
  o = opts({1});
  o.cancel = &cancel;
  const BenchRun run = run_suite(be, s, o, {});
  CHECK(run.meta.truncated);
  CHECK(run.records.empty());
}

TEST_CASE("runner: prompts that cannot fit the context are skipped and named", "[unit][bench]") {
  test::FakeBackend be;
  be.ctx = 20;  // "qa prompt " + i x + BOS = 11 + i ids; + depth 4 + 1 fits for i <= 3
  const BenchSuite s = test::fake_suite({"qa"}, 6);
  std::vector<std::string> skipped;
  const BenchRun run = run_suite(be, s, opts({1}), {}, &skipped);
  CHECK(skipped.size() == 2);
  for (const RequestRecord& r : run.records) CHECK(r.max_tokens == 20 - r.input_tokens - 4 - 1);
}

TEST_CASE("runner: an approximate configuration's divergence is recorded and labelled, not a failure",
          "[unit][bench][pipo]") {
  test::FakeBackend be;
  const BenchSuite s = test::fake_suite({"coding"}, 3);
  RunOptions o = opts({1});
  o.configs = parse_configs("baseline,pipo:t=0.85");
  const BenchRun run = run_suite(be, s, o, {});
  int approx = 0;
  for (const RequestRecord& r : run.records) {
    CHECK_FALSE(r.failed());
    if (r.config != "pipo:t=0.85") continue;
    ++approx;
    CHECK(r.approximate);
    CHECK_FALSE(r.identical);
    CHECK(r.first_diff == 2);
  }
  CHECK(approx == 3);
  const Aggregates a = aggregate(run);
  CHECK(a.failures == 0);
  const GroupAggregate& g = group(a, "pipo:t=0.85", 1, "coding");
  CHECK(g.approximate);
  CHECK(g.divergent == 3);
  CHECK(g.requests == 3);
  CHECK_FALSE(group(a, "baseline", 1, "coding").approximate);
  // The JSON record keeps the label.
  CHECK(record_from_json(record_json(run.records.back())).approximate == run.records.back().approximate);
}

TEST_CASE("runner: the fidelity gauge's figures reach the records and the aggregates", "[unit][bench][pipo]") {
  test::FakeBackend be;
  be.monitor.samples = 4;
  be.monitor.kl_sum = 0.4;
  be.monitor.kl_max = 0.25;
  const BenchSuite s = test::fake_suite({"coding"}, 3);
  RunOptions o = opts({1});
  o.configs = parse_configs("baseline,pipo:t=0.85");
  const BenchRun run = run_suite(be, s, o, {});
  for (const RequestRecord& r : run.records) {
    const bool pipo = r.config == "pipo:t=0.85";
    CHECK(r.fidelity_samples == (pipo ? 4 : 0));
    CHECK(r.fidelity_kl_max == (pipo ? 0.25 : 0.0));
    CHECK(record_from_json(record_json(r)).fidelity_kl_sum == r.fidelity_kl_sum);
  }
  const Aggregates a = aggregate(run);
  const GroupAggregate& g = group(a, "pipo:t=0.85", 1, "coding");
  CHECK(g.fidelity_samples == 12);
  CHECK(g.fidelity_kl_mean == Approx(0.1));
  CHECK(g.fidelity_kl_max == 0.25);
  CHECK(group(a, "baseline", 1, "coding").fidelity_samples == 0);
}

TEST_CASE("runner: the fidelity gauge's time is left out of TTFT and latency", "[unit][bench][pipo]") {
  // A backend whose approximate requests report more gauge time than they took: the runner
  // subtracts it and clamps at zero (TTFT) and at TTFT (latency).
  test::FakeBackend be;
  be.monitor.samples = 1;
  be.monitor.before_first_ms = 1e9;
  be.monitor.total_ms = 1e9;
  const BenchSuite s = test::fake_suite({"coding"}, 2);
  RunOptions o = opts({1});
  o.configs = parse_configs("baseline,pipo:t=0.85");
  const BenchRun run = run_suite(be, s, o, {});
  for (const RequestRecord& r : run.records) {
    if (r.config != "pipo:t=0.85") continue;
    CHECK(r.ttft_ms == 0);
    CHECK(r.latency_ms == 0);
  }
  // The waves' wall times too (regression: they kept it, so system tokens/s counted the gauge).
  int pipo_waves = 0;
  for (const WaveRecord& w : run.waves) {
    if (w.config != "pipo:t=0.85") continue;
    ++pipo_waves;
    CHECK(w.wall_ms == 0);
  }
  CHECK(pipo_waves == 2);
}

TEST_CASE("runner: PIPO steps give one accept length per step (token 2 after token 1)", "[unit][bench][pipo]") {
  test::FakeBackend be;
  const BenchSuite s = test::fake_suite({"coding"}, 2);
  RunOptions o = opts({1});
  o.max_tokens = 7;  // three whole steps and a cut one
  o.configs = parse_configs("baseline,pipo:t=0.85");
  const BenchRun run = run_suite(be, s, o, {});
  int approx = 0;
  for (const RequestRecord& r : run.records) {
    if (r.config != "pipo:t=0.85") continue;
    ++approx;
    CHECK(r.steps == 4);
    CHECK(r.accept_lengths == std::vector<int>{1, 1, 1, 0});
    REQUIRE(r.accepted_at.size() == 1);
    CHECK(r.accepted_at[0] == 3);
    CHECK(r.accepted == 3);
  }
  CHECK(approx == 2);
}
