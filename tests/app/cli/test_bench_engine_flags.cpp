// `specchat-cli bench` takes the engine flags of the other commands (--kv-type,
// --no-draft-backoff, --activations) in every mode, instead of refusing them as unexpected
// arguments, and its --out report records the KV type and the activations.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/cli_runner.h"

using namespace specchat;

TEST_CASE("bench accepts --kv-type and --no-draft-backoff in its modes", "[cli][bench]") {
  const std::vector<std::vector<std::string>> runs = {
      {"bench", "--max-prompts", "1", "-n", "4", "--chain-k", "2", "--budgets", "4", "--kv-type", "f32",
       "--no-draft-backoff"},
      {"bench", "--verify-cost", "--max-prompts", "1", "--kv-type", "f32"},
      {"bench", "--concurrency", "2", "--max-prompts", "2", "-n", "4", "--no-draft-backoff", "--kv-type", "f16"},
  };
  for (const auto& args : runs) {
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 0);
  }
  const test::CliResult bad = test::run_cli({"bench", "--max-prompts", "1", "-n", "4", "--kv-type", "bf16"});
  CHECK(bad.exit_code != 0);
  CHECK(bad.err.find("kv-type") != std::string::npos);
}

TEST_CASE("bench --out records --kv-type and --activations in its report", "[cli][bench]") {
  const std::string out = (std::filesystem::temp_directory_path() / ("specchat-bench-flags-" + std::to_string(getpid()) + ".json")).string();
  // (--budgets is the default run's; --concurrency refuses it.)
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--budgets", "4"}, {"--concurrency", "2"}}) {
    std::vector<std::string> args = {"bench", "--max-prompts", "2", "-n", "4", "--chain-k", "2",
                                     "--kv-type", "f32", "--activations", "f32", "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    std::ifstream in(out);
    const nlohmann::json j = nlohmann::json::parse(in);
    CHECK(j.at("kv_type") == "f32");
    CHECK(j.at("activations") == "f32");
  }
  std::filesystem::remove(out);
  const test::CliResult bad = test::run_cli({"bench", "--max-prompts", "1", "-n", "4", "--activations", "q4"});
  CHECK(bad.exit_code == 2);
}
