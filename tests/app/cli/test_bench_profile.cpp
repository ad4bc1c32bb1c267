// `specchat-cli bench --profile` (issue 10 §5): the time split per operation of decode and of
// verification, printed and written as JSON.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/cli_runner.h"
#include "engine/model_fixture.h"

using namespace specchat;

TEST_CASE("bench --profile: per-operation times of decode and verification add up to the decoding time",
          "[model][bench]") {
  REQUIRE(test::bundled_models_present());
  const std::string out = (std::filesystem::temp_directory_path() / "specchat_bench_profile.json").string();
  std::filesystem::remove(out);
  const auto r = test::run_cli({"bench", "--profile", "--max-prompts", "2", "-n", "16", "--profile-k", "3",
                                "--threads", "2", "--out", out});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("matmul gate/up 320 -> 864x2") != std::string::npos);
  CHECK(r.out.find("sampling and acceptance") != std::string::npos);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j["modes"].size() == 2);
  for (const auto& m : j["modes"]) {
    INFO(m["mode"].get<std::string>());
    CHECK(m["tokens"].get<int>() == 32);  // 2 prompts x 16 tokens, prefill not counted
    std::map<std::string, const nlohmann::json*> ops;
    double share = 0;
    for (const auto& op : m["ops"]) {
      ops[op["op"].get<std::string>()] = &op;
      CHECK(op["ms"].get<double>() >= 0);
      share += op["share"].get<double>();
    }
    // Every part is a slice of the decoding time: together they make it up (clamped remainders
    // may add a little).
    CHECK(share == Approx(1.0).margin(0.05));
    const long forwards = m["target_forwards"].get<long>();
    CHECK(forwards == m["steps"].get<long>());  // one target forward per step
    // One attention and one Q/K/V matmul per layer (6) per forward, one LM head per forward.
    REQUIRE(ops.count("target: attention"));
    CHECK((*ops["target: attention"])["calls"].get<long>() == 6 * forwards);
    REQUIRE(ops.count("target: matmul LM head 320 -> 4096"));
    CHECK((*ops["target: matmul LM head 320 -> 4096"])["calls"].get<long>() == forwards);
  }
  const auto& decode = j["modes"][0];
  const auto& verify = j["modes"][1];
  CHECK(decode["target_rows"].get<long>() == decode["target_forwards"].get<long>());  // 1 row per step
  CHECK(verify["target_rows"].get<long>() == 4 * verify["target_forwards"].get<long>());  // 1 + k=3 rows
  CHECK(verify["drafted"].get<long>() > 0);
  // The draft model's forwards split by operation, apart from "ops": together they are its line.
  REQUIRE(verify.contains("draft_ops"));
  double draft_ms = 0;
  bool head = false;
  for (const auto& op : verify["draft_ops"]) {
    draft_ms += op["ms"].get<double>();
    head = head || op["op"].get<std::string>().rfind("draft: matmul LM head", 0) == 0;
  }
  CHECK(head);
  double line_ms = -1;
  for (const auto& op : verify["ops"]) {
    if (op["op"].get<std::string>().rfind("draft model forwards", 0) == 0) line_ms = op["ms"].get<double>();
  }
  CHECK(draft_ms == Approx(line_ms).margin(1e-6));
  CHECK((!decode.contains("draft_ops") || decode["draft_ops"].empty()));  // no draft forward in plain decoding
}

TEST_CASE("bench --profile: a bad prompts file is named in the error, and combinations that would be ignored are refused",
          "[model][bench]") {
  REQUIRE(test::bundled_models_present());
  const auto dir = std::filesystem::temp_directory_path();
  const std::string bad = (dir / "specchat_bad_prompts.json").string();
  for (const std::string& content :
       {std::string("[]"), std::string("{\"prompts\": [{\"text\": \"x\"}]}"),
        std::string("{\"prompts\": [{\"kind\": \"weird\", \"text\": \"x\"}]}"),
        std::string("{\"prompts\": [{\"kind\": \"text\", \"text\": 3}]}")}) {
    {
      std::ofstream f(bad);
      f << content;
    }
    const auto r = test::run_cli({"bench", "--profile", "--prompts", bad, "-n", "2"});
    INFO(content << "\n" << r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("prompts file " + bad) != std::string::npos);
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "--profile", "--verify-cost"},
        std::vector<std::string>{"bench", "--profile", "--concurrency", "4"},
        std::vector<std::string>{"bench", "--profile", "--suite", "qualitative"}}) {
    const auto r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);  // a usage error (it was 1, a runtime error: a break-it pass, 2026-12-04)
    CHECK(r.err.find("cannot be combined") != std::string::npos);
  }
  // Options a mode would ignore (a break-it pass, 2026-12-04): refused with exit 2.
  const std::vector<std::pair<std::vector<std::string>, std::string>> ignored = {
      {{"bench", "--concurrency", "2,4"}, "several --concurrency levels need --suite"},
      {{"bench", "--profile", "--budgets", "4"}, "--budgets does not apply to --profile"},
      {{"bench", "--profile", "--chain-k", "2"}, "--chain-k does not apply to --profile"},
      {{"bench", "--verify-cost", "--chain-k", "3"}, "--chain-k does not apply to --verify-cost"},
      {{"bench", "--verify-cost", "--draft", "bundled"}, "--draft does not apply to --verify-cost"},
      {{"bench", "--concurrency", "2", "--budgets", "4"}, "--budgets does not apply to --concurrency"}};
  for (const auto& [args, message] : ignored) {
    const auto r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
}
