// [model] checks of the benchmark suite with the bundled pair: the throughput suite's buckets,
// and a tiny run of `specchat-cli bench --suite` end to end (reports included).
#include <map>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/cli/bench/report_files.h"
#include "app/cli/bench/suite.h"
#include "app/cli/bench/throughput_gen.h"
#include "engine/cli_runner.h"
#include "engine/model_fixture.h"
#include "report_checks.h"

using namespace specchat;
using namespace specchat::bench;

TEST_CASE("throughput suite: every prompt within 10% of its bucket, ids = the bundled tokenizer's", "[model][bench]") {
  REQUIRE(test::bundled_models_present());
  ModelPair& pair = test::bundled_pair();
  const BenchSuite s = load_suite(test::source_dir() + "/resources/bench/throughput.json");
  CHECK(default_buckets(pair.target->n_ctx()) == std::vector<int>{128, 256, 512, 768});
  for (const BenchPrompt& p : s.prompts) {
    INFO(p.id);
    const std::vector<int32_t> ids = pair.encode_prompt(p.turns.front());
    CHECK(ids == p.input_ids);
    CHECK(std::abs(static_cast<int>(ids.size()) - p.bucket) <= p.bucket / 10);
  }
  // The committed file is the generator's output (scripts/make-throughput-suite).
  ThroughputOptions to;
  to.buckets = {128, 256, 512, 768};
  to.tokenizer = s.tokenizer;
  const BenchSuite again = make_throughput_suite([&](const std::string& t) { return pair.encode_prompt(t); }, to);
  CHECK(suite_to_json(again) == suite_to_json(s));
}

TEST_CASE("bench --suite: tiny run (2 prompts per category, concurrency 1 and 2, baseline + chain k=4)",
          "[model][bench]") {
  REQUIRE(test::bundled_models_present());
  const std::string dir = (std::filesystem::temp_directory_path() / "specchat_bench_tiny").string();
  std::filesystem::remove_all(dir);
  const auto r = test::run_cli({"bench", "--suite", "qualitative", "--per-group", "2", "--concurrency", "1,2",
                                "--configs", "baseline,chain:k=4", "-n", "24", "--threads", "2", "--bootstrap-seed",
                                "5", "--report", dir},
                               300);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.wall_ms < 120000);
  const LoadedReport lr = load_report(dir + "/report.json");
  CHECK(lr.run.records.size() == 22 * 2 * 2);
  test::check_recompute(lr, 5);
  // An independent recomputation: mean TPOT of coding under chain:k=4 at concurrency 1, from the
  // CSV alone.
  std::ifstream csv(dir + "/per_request.csv");
  std::string line;
  std::getline(csv, line);
  double sum = 0;
  int n = 0, rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    REQUIRE(f.size() >= 18);
    if (f[1] == "coding" && f[4] == "chain:k=4" && f[5] == "1" && std::stoi(f[10]) > 1) {
      sum += std::stod(f[17]);
      ++n;
    }
  }
  CHECK(rows == 88);
  REQUIRE(n == 2);
  bool found = false;
  for (const auto& g : lr.aggregates["groups"]) {
    if (g["config"] == "chain:k=4" && g["concurrency"] == 1 && g["kind"] == "category" && g["group"] == "coding") {
      CHECK(g["tpot_ms"]["mean"].get<double>() == Approx(sum / n).epsilon(1e-6));
      CHECK(g["tau"].get<double>() > 1.0);
      found = true;
    }
  }
  CHECK(found);
  std::ifstream sm(dir + "/summary.csv");
  int srows = 0;
  while (std::getline(sm, line)) ++srows;
  CHECK(srows == static_cast<int>(lr.aggregates["groups"].size()) + 1);
  CHECK(lr.run.meta.target_sha256.size() == 64);
#ifdef SPECCHAT_BENCH_HTML
  std::ifstream h(dir + "/report.html");
  std::stringstream hs;
  hs << h.rdbuf();
  test::check_html(hs.str(), 7);
#endif
}

TEST_CASE("bench --suite: bad input is refused with a message", "[model][bench]") {
  auto r = test::run_cli({"bench", "--suite", "/no/such/suite.json"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot open suite file") != std::string::npos);
  r = test::run_cli({"bench", "--suite", "qualitative", "--configs", "beam:k=2"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("unknown family") != std::string::npos);
  r = test::run_cli({"bench-diff", "/no/a.json", "/no/b.json"});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("cannot open report") != std::string::npos);
}

// Regression: with --draft left at its automatic default, bench loaded no draft model and every
// "speculative" configuration ran as baseline (τ = 1, nothing drafted).
TEST_CASE("bench: the draft model is loaded when --draft is not given", "[model][bench]") {
  REQUIRE(test::bundled_models_present());
  const std::string out = (std::filesystem::temp_directory_path() / "specchat_bench_legacy.json").string();
  const auto r = test::run_cli({"bench", "--max-prompts", "1", "-n", "8", "--budgets", "4", "--chain-k", "2",
                                "--threads", "2", "--out", out});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  bool saw_chain = false;
  for (const auto& row : j["rows"]) {
    if (row["family"] != "chain") continue;
    saw_chain = true;
    CHECK(row["drafted"].get<int>() > 0);
  }
  CHECK(saw_chain);
  const std::string dir = (std::filesystem::temp_directory_path() / "specchat_bench_draft").string();
  const auto s = test::run_cli({"bench", "--suite", "qualitative", "--per-group", "1", "--configs",
                                "chain:k=3,block:k=3,mtp-tree:n=6:d=3:b=2", "-n", "8", "--threads", "2", "--report", dir});
  INFO(s.describe());
  REQUIRE(s.exit_code == 0);
  const LoadedReport lr = load_report(dir + "/report.json");
  std::map<std::string, long> drafted;
  for (const RequestRecord& rec : lr.run.records) {
    drafted[rec.config] += rec.drafted;
    if (rec.config != "baseline") CHECK(rec.identical);  // the bundled drafters are lossless here too
  }
  CHECK(drafted["chain:k=3"] > 0);
  CHECK(drafted["block:k=3"] > 0);  // the bundled block drafter, found beside the target
  CHECK(drafted["mtp-tree:n=6:d=3:b=2"] > 0);
}

TEST_CASE("bench --suite: a suite none of whose prompts fits measures nothing, and says so with exit 1", "[model][bench]") {
  // Found by a fresh-clone check: it printed an empty summary and exited 0.
  REQUIRE(test::bundled_models_present());
  const std::string path = (std::filesystem::temp_directory_path() / "specchat_bench_too_long.json").string();
  {
    std::ofstream out(path);
    out << R"({"format": "specchat-bench-suite", "version": 1, "prompts": [{"id": "a", "category": "c", "source": "t", "turns": [")"
        << std::string(20000, 'a') << " " << std::string(20000, 'b') << R"("]}]})";
  }
  const auto r = test::run_cli({"bench", "--suite", path, "--configs", "baseline,chain:k=3", "-n", "4"}, 120);
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("nothing was measured") != std::string::npos);
  std::filesystem::remove(path);
}

TEST_CASE("cli: bench refuses options of the other mode", "[cli][bench]") {
  const auto a = test::run_cli({"bench", "--suite", "qualitative", "--max-prompts", "2"});
  CHECK(a.exit_code == 2);
  CHECK(a.err.find("--max-prompts does not apply to --suite") != std::string::npos);
  const auto b = test::run_cli({"bench", "--per-group", "2"});
  CHECK(b.exit_code == 2);
  CHECK(b.err.find("--per-group needs --suite") != std::string::npos);
  // Found by the helper: these were accepted and ignored.
  const auto c = test::run_cli({"bench", "--max-prompts", "1", "-n", "4", "--max-time", "1"});
  CHECK(c.exit_code == 2);
  CHECK(c.err.find("--max-time needs --suite") != std::string::npos);
  // Found by a later helper: --out with --suite wrote nothing, and --max-time nan ran unbounded.
  const auto g = test::run_cli({"bench", "--suite", "qualitative", "--configs", "baseline", "--out", "/tmp/x.json"});
  CHECK(g.exit_code == 2);
  CHECK(g.err.find("--out does not apply to --suite") != std::string::npos);
  const auto h = test::run_cli({"bench", "--suite", "qualitative", "--configs", "baseline", "--max-time", "nan"});
  CHECK(h.exit_code == 2);
  CHECK(h.err.find("finite") != std::string::npos);
  const auto d = test::run_cli({"bench", "--profile-k", "2", "-n", "4", "--max-prompts", "1"});
  CHECK(d.exit_code == 2);
  CHECK(d.err.find("--profile-k needs --profile") != std::string::npos);
  const auto e = test::run_cli({"bench", "--suite", "qualitative", "--configs", "baseline", "--pipo", "/nonexistent"});
  CHECK(e.exit_code == 1);
  CHECK(e.err.find("need a pipo:t=X configuration") != std::string::npos);
  const auto f = test::run_cli({"bench", "--suite", "qualitative", "--configs", "baseline", "--pipo-fidelity", "1",
                                "--endpoint", "http://127.0.0.1:9/v1"});
  CHECK(f.exit_code == 1);
  CHECK(f.err.find("cannot be combined with --endpoint") != std::string::npos);
}
