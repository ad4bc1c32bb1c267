// The timing cache of `--tree auto` (engine/speculative/calibration_store.h: timing_cache_dir,
// timing_cache_path, cache_calibration_timings): measured timings go to the user's cache folder,
// per pair of model files and per setup, and are read back when the calibration file beside the
// draft has none; that file is never written.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"
#include "engine/step_timings_fixture.h"

using namespace specchat;
using test::linear_timings;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_file_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

}  // namespace

// `--tree auto` caches the timings it measures in the user's cache (timing_cache_path), never in
// the calibration file beside the draft (read-only when installed, tracked in a checkout); a
// later load takes them when the calibration file has none for the setup.
TEST_CASE("timing cache: auto's timings go to the cache folder, the calibration file is never written", "[unit]") {
  const fs::path dir = fs::temp_directory_path() / ("specchat-timing-cache-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "models");
  const std::string target = (dir / "models" / "t.gguf").string(), draft = (dir / "models" / "d.gguf").string();
  std::ofstream(target) << "target bytes";
  std::ofstream(draft) << "draft bytes";
  const std::string old_env = std::getenv("SPECCHAT_CACHE_DIR") ? std::getenv("SPECCHAT_CACHE_DIR") : "";
  ::setenv("SPECCHAT_CACHE_DIR", (dir / "cache").c_str(), 1);
  const std::string cache = timing_cache_path(draft);
  CHECK(cache.rfind((dir / "cache" / "timings" / "d-").string(), 0) == 0);
  CHECK(cache.size() > 5);
  CHECK(cache.substr(cache.size() - 5) == ".json");

  // No calibration file: timings cached for setup 2 threads serve that setup only.
  Calibration c = load_calibration(target, draft, TimingSetup{2});
  CHECK(c.status == Calibration::Status::missing);
  CHECK_FALSE(c.timings.valid());
  CHECK(cache_calibration_timings(target, draft, linear_timings(1, 2, 3), TimingSetup{2}, 8, 1) == cache);
  CHECK(fs::exists(cache));
  CHECK_FALSE(fs::exists(calibration_path(draft)));
  c = load_calibration(target, draft, TimingSetup{2});
  CHECK(c.status == Calibration::Status::missing);
  REQUIRE(c.timings.valid());
  CHECK(c.timings_cached);
  CHECK(c.timings.t_verify(0) == Approx(2.0));
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{1}).timings.valid());
  // Another setup's table is kept beside it.
  cache_calibration_timings(target, draft, linear_timings(1, 5, 6), TimingSetup{1}, 8, 1);
  CHECK(load_calibration(target, draft, TimingSetup{2}).timings.valid());
  CHECK(load_calibration(target, draft, TimingSetup{1}).timings.t_verify(0) == Approx(5.0));

  // A calibration file with its own table for the setup wins over the cache, and is not written.
  const nlohmann::json cal{{"version", 1}, {"backend", "cpu"}, {"target", calibration_file_info(target)},
                           {"draft", calibration_file_info(draft)},
                           {"timings", calibration_timings_json(linear_timings(1, 9, 9), TimingSetup{2}, 8, 1)}};
  write_calibration_file(calibration_path(draft), cal);
  const auto written = fs::last_write_time(calibration_path(draft));
  c = load_calibration(target, draft, TimingSetup{2});
  CHECK_FALSE(c.timings_cached);
  CHECK(c.timings.t_verify(0) == Approx(9.0));
  cache_calibration_timings(target, draft, linear_timings(1, 7, 7), TimingSetup{2}, 8, 1);
  CHECK(fs::last_write_time(calibration_path(draft)) == written);
  CHECK(read_file_json(calibration_path(draft)) == cal);

  // A cache made for another draft file (same name, other bytes) is not used, and is replaced.
  std::ofstream(draft) << "another draft";
  CHECK(timing_cache_path(draft) != cache);  // the fingerprint names the file's bytes
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{1}).timings.valid());
  std::ofstream(target) << "another target";
  fs::remove(calibration_path(draft));
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{1}).timings.valid());
  cache_calibration_timings(target, draft, linear_timings(1, 4, 4), TimingSetup{1}, 8, 1);
  CHECK(load_calibration(target, draft, TimingSetup{1}).timings.t_verify(0) == Approx(4.0));

  // No cache folder at all: nothing cached, a clear error.
  ::setenv("SPECCHAT_CACHE_DIR", "", 1);
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  ::unsetenv("HOME");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  CHECK(timing_cache_dir().empty());
  CHECK(timing_cache_path(draft).empty());
  CHECK_THROWS_WITH(cache_calibration_timings(target, draft, linear_timings(1, 4, 4), TimingSetup{1}, 8, 1),
                    Catch::Contains("no cache folder"));
  ::setenv("XDG_CACHE_HOME", (dir / "xdg").c_str(), 1);
  CHECK(timing_cache_dir() == (dir / "xdg" / "specchat").string());
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", (dir / "home").c_str(), 1);
  CHECK(timing_cache_dir() == (dir / "home" / ".cache" / "specchat").string());
  if (!home.empty()) ::setenv("HOME", home.c_str(), 1);
  if (!xdg.empty()) ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
  ::setenv("SPECCHAT_CACHE_DIR", old_env.c_str(), 1);
  fs::remove_all(dir);
}
