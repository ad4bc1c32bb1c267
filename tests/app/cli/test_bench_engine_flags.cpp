// `specchat-cli bench` takes the engine flags of the other commands (--kv-type,
// --no-draft-backoff, --activations) in every mode, instead of refusing them as unexpected
// arguments, and its --out report records the KV type and the activations.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "engine/cli_runner.h"
#include "test_paths.h"

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

// Regression (break-it pass, 2026-12-05): a target with no draft beside it printed
// "note: no draft model (--draft ): …", naming a flag nobody gave with an empty value.
TEST_CASE("bench says why the draft-model rows are left out when no draft was found", "[cli][bench]") {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("specchat-bench-nodraft-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string target = (dir / "lonely-target.gguf").string();
  std::filesystem::copy_file(test::target_model(), target, std::filesystem::copy_options::overwrite_existing);
  const test::CliResult r =
      test::run_cli({"bench", "--model", target, "--max-prompts", "1", "-n", "4", "--chain-k", "1", "--budgets", "1"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("note: no draft model (none found for the target)") != std::string::npos);
  CHECK(r.err.find("--draft )") == std::string::npos);
  std::filesystem::remove_all(dir);
}
