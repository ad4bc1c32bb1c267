// RequestPlanner's timing cache (engine/runtime/request_planner.cpp, plan_tree with a bound
// pair): what `--tree auto` measures on the request's context and caches (timing_cache_path, in
// this test process's own cache folder: tests/test_cache_dir.h), end to end through the CLI on
// copies of the bundled pair.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/cli_runner.h"
#include "engine/model_fixture.h"
#include "engine/speculative/calibration_store.h"

using namespace specchat;
namespace fs = std::filesystem;

TEST_CASE("request planner: --tree auto on a tiny context does not cache its partial timing table", "[model][cli]") {
  // Regression: `--tree auto --ctx 8` timed verification only up to 4 nodes (what fits in 8
  // tokens) and cached that table, so every later run with the full context planned from it
  // (auto trees of at most 4 nodes) instead of timing the models again.
  const fs::path dir = fs::temp_directory_path() / ("specchat-tinyctx-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string target = (dir / "target.gguf").string(), draft = (dir / "draft.gguf").string();
  fs::copy_file(test::target_model(), target, fs::copy_options::overwrite_existing);
  fs::copy_file(test::draft_model(), draft, fs::copy_options::overwrite_existing);
  const std::vector<std::string> base = {"generate", "--json", "--model", target, "--draft", draft, "--tree", "auto",
                                         "-n", "2", "--prompt", "Once upon a time", "--threads", "1"};
  std::vector<std::string> tiny = base;
  tiny.insert(tiny.end(), {"--ctx", "8"});
  const test::CliResult r = test::run_cli(tiny);
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  const TimingSetup one{1, "f16", "f32"};
  Calibration c = load_calibration(target, draft, one);
  const bool partial_cached = c.timings.valid() && c.timings.verify_nodes.back() < calibration_verify_nodes().back();
  CHECK_FALSE(partial_cached);
  // A run with the whole context times every node count and caches the full table.
  const test::CliResult full = test::run_cli(base);
  INFO(full.describe());
  CHECK(full.exit_code == 0);
  c = load_calibration(target, draft, one);
  REQUIRE(c.timings.valid());
  CHECK(c.timings.verify_nodes.back() == calibration_verify_nodes().back());
  fs::remove_all(dir);
}

TEST_CASE("request planner: --tree auto times every node count up to 8 and every small draft width", "[model][cli]") {
  // Regression: the table held 0, 1, 2, 4, 8, ... nodes, so a 3-node chain's verification was
  // interpolated between 2 and 4. The kernels tile rows (a 4-node chain verifies 5 rows, one
  // more pass), times are not linear in between, and auto chose a chain of 4 (1.61-1.64x on
  // the held-out prompts) over the faster 3 (1.73-1.74x).
  const fs::path dir = fs::temp_directory_path() / ("specchat-allnodes-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string target = (dir / "target.gguf").string(), draft = (dir / "draft.gguf").string();
  fs::copy_file(test::target_model(), target, fs::copy_options::overwrite_existing);
  fs::copy_file(test::draft_model(), draft, fs::copy_options::overwrite_existing);
  const test::CliResult r = test::run_cli({"generate", "--json", "--model", target, "--draft", draft, "--tree", "auto",
                                           "-n", "2", "--prompt", "Once upon a time", "--threads", "1"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  const Calibration c = load_calibration(target, draft, TimingSetup{1, "f16", "f32"});
  REQUIRE(c.timings.valid());
  CHECK(c.timings_cached);
  for (int n = 0; n <= 8; ++n) {
    INFO("verify nodes " << n);
    CHECK(std::find(c.timings.verify_nodes.begin(), c.timings.verify_nodes.end(), n) != c.timings.verify_nodes.end());
  }
  for (int w = 1; w <= 4; ++w) {
    INFO("draft width " << w);
    CHECK(std::find(c.timings.draft_widths.begin(), c.timings.draft_widths.end(), w) != c.timings.draft_widths.end());
  }
  fs::remove_all(dir);
}
