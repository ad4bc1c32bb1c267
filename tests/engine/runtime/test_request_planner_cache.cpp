// RequestPlanner's timing cache (engine/runtime/request_planner.cpp, plan_tree with a bound
// pair): what `--tree auto` measures on the request's context and caches (timing_cache_path, in
// this test process's own cache folder: tests/test_cache_dir.h), end to end through the CLI on
// copies of the bundled pair.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/cli_runner.h"
#include "engine/model_fixture.h"
#include "engine/speculative/calibration_store.h"

using namespace specchat;
namespace fs = std::filesystem;

namespace {

// Copies of the bundled pair in a folder of their own (their own timing cache file), removed
// at the end.
struct CopiedPair {
  fs::path dir;
  std::string target, draft;
  explicit CopiedPair(const std::string& name)
      : dir(fs::temp_directory_path() / ("specchat-" + name + "-" + std::to_string(::getpid()))) {
    fs::create_directories(dir);
    target = (dir / "target.gguf").string();
    draft = (dir / "draft.gguf").string();
    fs::copy_file(test::target_model(), target, fs::copy_options::overwrite_existing);
    fs::copy_file(test::draft_model(), draft, fs::copy_options::overwrite_existing);
  }
  ~CopiedPair() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// The timing cache of the pair as written, null when absent or not JSON.
nlohmann::json cache_doc(const std::string& target, const std::string& draft) {
  std::ifstream in(timing_cache_path(target, draft));
  return in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
}

// Its latest table's verification node counts; empty when there is none.
std::vector<int> cached_verify_nodes(const std::string& target, const std::string& draft) {
  const nlohmann::json doc = cache_doc(target, draft);
  if (!doc.is_object() || !doc.contains("timings")) return {};
  return doc["timings"].value("verify_nodes", std::vector<int>{});
}

}  // namespace

TEST_CASE("request planner: --tree auto on a tiny context does not cache its partial timing table", "[model][cli]") {
  // Regression: `--tree auto --ctx 8` timed verification only up to 4 nodes (what fits in 8
  // tokens) and cached that table, so every later run with the full context planned from it
  // (auto trees of at most 4 nodes) instead of timing the models again.
  const CopiedPair pair("tinyctx");
  const std::string &target = pair.target, &draft = pair.draft;
  const std::vector<std::string> base = {"generate", "--json", "--model", target, "--draft", draft, "--tree", "auto",
                                         "-n", "2", "--prompt", "Once upon a time", "--threads", "1"};
  std::vector<std::string> tiny = base;
  tiny.insert(tiny.end(), {"--ctx", "8"});
  const test::CliResult r = test::run_cli(tiny);
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  // The cache file as written (read raw: a table measured while the cores were busy is cached
  // with its disorder and not planned from, so load_calibration may pass over it).
  CHECK_FALSE(fs::exists(timing_cache_path(target, draft)));
  // A run with the whole context times every node count and caches the full table.
  const test::CliResult full = test::run_cli(base);
  INFO(full.describe());
  CHECK(full.exit_code == 0);
  const std::vector<int> nodes = cached_verify_nodes(target, draft);
  REQUIRE_FALSE(nodes.empty());
  CHECK(nodes.back() == calibration_verify_nodes().back());
}

TEST_CASE("request planner: --tree auto times every node count up to 8 and every small draft width", "[model][cli]") {
  // Regression: the table held 0, 1, 2, 4, 8, ... nodes, so a 3-node chain's verification was
  // interpolated between 2 and 4. The kernels tile rows (a 4-node chain verifies 5 rows, one
  // more pass), times are not linear in between, and auto chose a chain of 4 (1.61-1.64x on
  // the held-out prompts) over the faster 3 (1.73-1.74x).
  const CopiedPair pair("allnodes");
  const std::string &target = pair.target, &draft = pair.draft;
  const test::CliResult r = test::run_cli({"generate", "--json", "--model", target, "--draft", draft, "--tree", "auto",
                                           "-n", "2", "--prompt", "Once upon a time", "--threads", "1"});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  const std::vector<int> nodes = cached_verify_nodes(target, draft);
  const nlohmann::json doc = cache_doc(target, draft);
  REQUIRE(doc.is_object());
  const std::vector<int> widths = doc.at("timings").at("draft_widths").get<std::vector<int>>();
  for (int n = 0; n <= 8; ++n) {
    INFO("verify nodes " << n);
    CHECK(std::find(nodes.begin(), nodes.end(), n) != nodes.end());
  }
  for (int w = 1; w <= 4; ++w) {
    INFO("draft width " << w);
    CHECK(std::find(widths.begin(), widths.end(), w) != widths.end());
  }
  CHECK(doc.at("timings").at("disorder").get<double>() >= 1.0);
}
