#include <catch2/catch.hpp>
#include <sstream>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/report_files.h"
#include "app/cli/bench/runner.h"
#include "fake_backend.h"
#include "report_checks.h"
#ifdef SPECCHAT_BENCH_HTML
#include "app/cli/bench/report_html.h"
#endif

using namespace specchat;
using namespace specchat::bench;

namespace {
BenchRun fake_run(bool with_tiers) {
  test::FakeBackend be;
  be.mismatch_prompt_len = 18;  // "writing prompt xx" + BOS (no other prompt has 18 ids)
  BenchSuite s = test::fake_suite({"coding", "writing"}, 3);
  if (with_tiers) {
    for (size_t i = 0; i < s.prompts.size(); ++i) {
      s.prompts[i].tier = entropy_tiers()[i % 3];
      s.prompts[i].bucket = i < 3 ? 32 : 64;
    }
  }
  RunOptions o;
  o.concurrency = {1, 2};
  o.configs = parse_configs("baseline,chain:k=4,ngram:k=2");
  o.max_tokens = 10;
  BenchRun run = run_suite(be, s, o, {});
  run.meta.suite_name = "fake <suite> & co";
  run.meta.settings = {{"configs", "x"}};
  return run;
}
}  // namespace

TEST_CASE("report.json round trip: aggregates recompute from the records", "[unit][bench]") {
  const BenchRun run = fake_run(true);
  const Aggregates agg = aggregate(run, {1000, 9});
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/specchat_bench_rt.json";
  write_text_file(path, report_json(run, agg, {"x: too long"}).dump(1));
  const LoadedReport lr = load_report(path);
  CHECK(lr.run.records.size() == run.records.size());
  CHECK(lr.run.meta.suite_name == run.meta.suite_name);
  test::check_recompute(lr, 9);
  CHECK(agg.failures == 2 * 2);  // one prompt, 2 speculative configurations, 2 concurrency levels
  std::remove(path.c_str());
  CHECK_THROWS_AS(load_report(path), std::runtime_error);
}

TEST_CASE("CSV reports: one row per record / group, quoted fields", "[unit][bench]") {
  BenchRun run = fake_run(false);
  run.records[0].error = "bad, \"quoted\"";
  const Aggregates agg = aggregate(run);
  const std::string pr = per_request_csv(run), sm = summary_csv(agg);
  CHECK(test::count_of(pr, "\n") == static_cast<int>(run.records.size()) + 1);
  CHECK(test::count_of(sm, "\n") == static_cast<int>(agg.groups.size()) + 1);
  CHECK(pr.find("\"bad, \"\"quoted\"\"\"") != std::string::npos);
  // Header column count equals every row's (no field with a comma escapes its quotes).
  std::istringstream in(sm);
  std::string line;
  std::getline(in, line);
  const int cols = test::count_of(line, ",");
  while (std::getline(in, line)) CHECK(test::count_of(line, ",") == cols);
}

#ifdef SPECCHAT_BENCH_HTML
TEST_CASE("report.html: self-contained, well-formed, every plot, failures listed", "[unit][bench]") {
  const BenchRun run = fake_run(true);
  const std::string html = report_html(run, aggregate(run), {"p: skipped"});
  test::check_html(html, 8);
  CHECK(html.find("FAILURES: 4") != std::string::npos);
  CHECK(html.find("fake &lt;suite&gt; &amp; co") != std::string::npos);
  CHECK(html.find("Speedup against input length") != std::string::npos);
  const BenchRun plain = fake_run(false);
  const std::string h2 = report_html(plain, aggregate(plain), {});
  test::check_html(h2, 7);
  CHECK(h2.find("No throughput prompts") != std::string::npos);
}
#else
TEST_CASE("report.html: not built (no Qt Charts / Qt SVG)", "[unit][bench]") {
  WARN("report.html tests skipped: this build has no Qt Charts and Qt SVG (qt6-charts-dev, libqt6svg6-dev)");
}
#endif

TEST_CASE("report.json read back: hostile documents are refused, not a crash", "[unit][bench]") {
  // Found by a fresh-clone check: a report whose meta.settings nested 100,000 levels crashed
  // bench-diff and the app's saved runs (a recursive copy of the value); a version of 1.9 read as
  // 1; a 50,000-character config name made the charts take gigabytes.
  const BenchRun run = fake_run(false);
  const Aggregates agg = aggregate(run);
  const nlohmann::json good = report_json(run, agg, {});
  CHECK_NOTHROW(parse_report(good.dump(), "good"));
  auto refused = [](const nlohmann::json& doc, const char* what) {
    std::string why;
    try {
      parse_report(doc.dump(), "bad.json");
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
    INFO(what);
    CHECK(why.find("bad.json") != std::string::npos);
    return why;
  };
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < 100000; ++i) deep += "}";
  std::string text = good.dump();
  const std::string key = "\"settings\":";
  const size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  const size_t end = text.find('}', at);  // fake_run's settings: {"configs":"x"}
  text.replace(at + key.size(), end + 1 - (at + key.size()), deep);
  std::string why;
  try {
    parse_report(text, "deep.json");
  } catch (const std::runtime_error& e) {
    why = e.what();
  }
  CHECK(why.find("nested") != std::string::npos);
  nlohmann::json v = good;
  v["version"] = 1.9;
  refused(v, "version 1.9");
  v["version"] = 4294967297LL;
  refused(v, "version 2^32 + 1");
  nlohmann::json f = good;
  f["format"] = 5;
  refused(f, "format not a string");
  nlohmann::json n = good;
  n["records"][0]["config"] = std::string(50000, 'x');
  CHECK(refused(n, "long config name").find("long") != std::string::npos);
}

TEST_CASE("suite files: a version that only truncates to 1 and a format that is not a string are refused", "[unit][bench]") {
  nlohmann::json s = {{"format", "specchat-bench-suite"}, {"version", 4294967297LL},
                      {"prompts", {{{"id", "a"}, {"category", "c"}, {"turns", {"hi"}}, {"source", "t"}}}}};
  CHECK_THROWS_AS(parse_suite(s, "v.json"), SuiteError);
  s["version"] = 1;
  CHECK_NOTHROW(parse_suite(s, "v.json"));
  s["format"] = 5;
  CHECK_THROWS_WITH(parse_suite(s, "f.json"), Catch::Contains("f.json"));
}
