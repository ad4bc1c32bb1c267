// `specchat-cli bench` takes the engine flags of the other commands (--kv-type,
// --no-draft-backoff) in every mode, instead of refusing them as unexpected arguments.
#include <catch2/catch.hpp>

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
