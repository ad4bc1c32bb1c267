// Where `specchat-cli calibrate` writes without --out, and which calibration a plan then reads
// (engine/speculative/calibration_store.h: calibration_write_path, calibration_read_path).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/cli_runner.h"
#include "engine/model_fixture.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"

using namespace specchat;
namespace fs = std::filesystem;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("calibrate: the bundled pair's calibration is never replaced and the user's own is read first",
          "[model][cli][calibration]") {
  // Regression (break-it pass of 2026-12-05): `specchat-cli calibrate` without --out rewrote the
  // bundled calibration, a file tracked in the repository (adding this machine's timings), and
  // an installed program could not be calibrated at all (its models folder is read-only).
  if (!test::bundled_models_present()) {
    WARN("SKIPPED: the bundled models are not in this checkout");
    return;
  }
  const std::string target = test::target_model(), draft = test::draft_model();
  const std::string shipped = calibration_path(draft);
  const std::string shipped_before = file_bytes(shipped);
  const std::string own = user_calibration_path(target, draft);
  REQUIRE_FALSE(own.empty());  // the test process has its own cache folder (tests/test_cache_dir.h)
  fs::remove(own);
  CHECK(calibration_read_path(target, draft) == shipped);
  CHECK(calibration_write_path(target, draft) == own);

  const test::CliResult r = test::run_cli({"calibrate", "--json", "--max-prompts", "2", "-n", "8", "--threads", "1"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.json.at("path") == own);
  CHECK(fs::exists(own));
  CHECK(file_bytes(shipped) == shipped_before);
  CHECK(calibration_read_path(target, draft) == own);

  // Plans read the user's calibration (its acceptance comes from these 2 prompts).
  const test::CliResult g = test::run_cli(
      {"generate", "--json", "--tree", "auto", "-n", "2", "--prompt", "Once upon a time", "--threads", "1"});
  INFO(g.describe());
  REQUIRE(g.exit_code == 0);
  CHECK(g.json.at("tree_plan").at("calibration") == own);
  CHECK(g.json.at("tree_plan").at("acceptance_source") == "calibration");
  fs::remove(own);
  CHECK(calibration_read_path(target, draft) == shipped);

  // No cache folder: refused with the reason, the bundled file untouched (break-it: it was
  // rewritten in place).
  const char* cache = std::getenv("SPECCHAT_CACHE_DIR");
  const std::string saved = cache ? cache : "";
  const char* home = std::getenv("HOME");
  const std::string saved_home = home ? home : "";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string saved_xdg = xdg ? xdg : "";
  ::setenv("SPECCHAT_CACHE_DIR", "relative-is-ignored", 1);
  ::setenv("HOME", "relative-home", 1);
  ::unsetenv("XDG_CACHE_HOME");
  const test::CliResult none = test::run_cli({"calibrate", "--max-prompts", "1", "-n", "4", "--threads", "1"});
  ::setenv("SPECCHAT_CACHE_DIR", saved.c_str(), 1);
  ::setenv("HOME", saved_home.c_str(), 1);
  if (xdg) ::setenv("XDG_CACHE_HOME", saved_xdg.c_str(), 1);
  INFO(none.describe());
  CHECK(none.exit_code != 0);
  CHECK(none.err.find("no cache folder") != std::string::npos);
  CHECK(none.err.find("--out") != std::string::npos);
  CHECK(file_bytes(shipped) == shipped_before);
}

TEST_CASE("calibrate: beside a draft of the user's own, in the cache for a bundled one", "[unit][calibration]") {
  const fs::path dir = fs::temp_directory_path() / ("specchat-calout-" + std::to_string(::getpid()));
  fs::create_directories(dir / "bundled");
  fs::create_directories(dir / "mine");
  for (const char* sub : {"bundled", "mine"}) {
    std::ofstream(dir / sub / "t.gguf") << "target bytes of " << sub;
    std::ofstream(dir / sub / "d.gguf") << "draft bytes";
  }
  const char* old = std::getenv("SPECCHAT_MODELS");
  const std::string saved = old ? old : "";
  ::setenv("SPECCHAT_MODELS", (dir / "bundled").c_str(), 1);
  const std::string bt = (dir / "bundled" / "t.gguf").string(), bd = (dir / "bundled" / "d.gguf").string();
  const std::string mt = (dir / "mine" / "t.gguf").string(), md = (dir / "mine" / "d.gguf").string();
  CHECK(is_bundled_model(bd));
  CHECK(is_bundled_model((dir / "bundled" / "." / "d.gguf").string()));
  CHECK_FALSE(is_bundled_model(md));
  fs::create_symlink(bd, dir / "mine" / "link.gguf");  // the user's link to a bundled model is theirs
  CHECK_FALSE(is_bundled_model((dir / "mine" / "link.gguf").string()));
  CHECK(calibration_write_path(bt, bd) == user_calibration_path(bt, bd));
  CHECK(calibration_write_path(mt, md) == calibration_path(md));
  // The user's file is per pair: another target gets another one.
  CHECK(user_calibration_path(mt, bd) != user_calibration_path(bt, bd));
  // A drafter of the user's own reads the calibration beside it even when the cache holds one
  // for the same files (regression: a copy of the bundled pair calibrated in its own folder
  // kept planning from the older cache file made for the bundled one).
  const std::string cached = user_calibration_path(mt, md);
  REQUIRE_FALSE(cached.empty());
  fs::create_directories(fs::path(cached).parent_path());
  std::ofstream(cached) << "{}";
  CHECK(calibration_read_path(mt, md) == calibration_path(md));
  std::ofstream(user_calibration_path(bt, bd)) << "{}";
  CHECK(calibration_read_path(bt, bd) == user_calibration_path(bt, bd));
  fs::remove(cached);
  fs::remove(user_calibration_path(bt, bd));
  if (old) {
    ::setenv("SPECCHAT_MODELS", saved.c_str(), 1);
  } else {
    ::unsetenv("SPECCHAT_MODELS");
  }
  fs::remove_all(dir);
}
