// The timing cache of `--tree auto` (engine/speculative/calibration_store.h: timing_cache_dir,
// timing_cache_path, cache_calibration_timings): measured timings go to the user's cache folder,
// per pair of model files and per setup, and are read back when the calibration file beside the
// draft has none; that file is never written.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>
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
  const std::string cache = timing_cache_path(target, draft);
  CHECK(cache.rfind((dir / "cache" / "timings" / "d-").string(), 0) == 0);
  CHECK(cache.size() > 5);
  CHECK(cache.substr(cache.size() - 5) == ".json");

  // Caches of earlier timing methods are not read: the first (named without a suffix: each size
  // timed in turn, the first one cold, its one-row time inflated: auto chose chains too short)
  // t2 (0, 1, 2, 4, 8, ... nodes: a 3-node chain interpolated, auto chose 4 over 3) and t3 (a
  // 64-token timing context: the chains of 3 and 4 too close to tell apart).
  CHECK(cache.substr(cache.size() - 8) == "-t4.json");
  for (const char* suffix : {".json", "-t2.json", "-t3.json"}) {
    const std::string old_name = cache.substr(0, cache.size() - 8) + suffix;
    fs::create_directories(fs::path(cache).parent_path());
    const nlohmann::json old_doc{{"target", calibration_file_info(target)}, {"draft", calibration_file_info(draft)},
                                 {"timings", calibration_timings_json(linear_timings(1, 2, 3), TimingSetup{2}, 8, 1)}};
    std::ofstream(old_name) << old_doc.dump();
  }
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

  // Other bytes in a model file: another cache (the fingerprints name the files' bytes).
  std::ofstream(draft) << "another draft";
  CHECK(timing_cache_path(target, draft) != cache);
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{1}).timings.valid());
  fs::remove(calibration_path(draft));
  cache_calibration_timings(target, draft, linear_timings(1, 4, 4), TimingSetup{1}, 8, 1);
  CHECK(load_calibration(target, draft, TimingSetup{1}).timings.t_verify(0) == Approx(4.0));
  // One draft with two targets keeps two caches: alternating them does not re-time each run.
  const std::string target2 = (dir / "models" / "t2.gguf").string();
  std::ofstream(target2) << "a second target";
  CHECK(timing_cache_path(target2, draft) != timing_cache_path(target, draft));
  cache_calibration_timings(target2, draft, linear_timings(1, 8, 8), TimingSetup{1}, 8, 1);
  CHECK(load_calibration(target, draft, TimingSetup{1}).timings.t_verify(0) == Approx(4.0));
  CHECK(load_calibration(target2, draft, TimingSetup{1}).timings.t_verify(0) == Approx(8.0));

  // No cache folder at all: nothing cached, a clear error.
  ::setenv("SPECCHAT_CACHE_DIR", "relative/cache", 1);  // relative: ignored, as XDG's
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const std::string xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  ::unsetenv("HOME");
  ::setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  CHECK(timing_cache_dir().empty());
  CHECK(timing_cache_path(target, draft).empty());
  CHECK_THROWS_WITH(cache_calibration_timings(target, draft, linear_timings(1, 4, 4), TimingSetup{1}, 8, 1),
                    Catch::Contains("no cache folder"));
  ::setenv("XDG_CACHE_HOME", (dir / "xdg").c_str(), 1);
  CHECK(timing_cache_dir() == (dir / "xdg" / "specchat").string());
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", (dir / "home").c_str(), 1);
  CHECK(timing_cache_dir() == (dir / "home" / ".cache" / "specchat").string());
  ::setenv("HOME", "relhome", 1);  // regression: a relative HOME made ./relhome/.cache/specchat
  CHECK(timing_cache_dir().empty());
  if (!home.empty()) ::setenv("HOME", home.c_str(), 1);
  if (!xdg.empty()) ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
  ::setenv("SPECCHAT_CACHE_DIR", old_env.c_str(), 1);
  fs::remove_all(dir);
}

namespace {

// A pair of stand-in model files and a private cache folder, restored at the end.
struct CacheScratch {
  fs::path dir;
  std::string target, draft, saved;
  CacheScratch() {
    dir = fs::temp_directory_path() / ("specchat-timing-cache-bad-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "cache");
    target = (dir / "t.gguf").string();
    draft = (dir / "d.gguf").string();
    std::ofstream(target) << "target bytes";
    std::ofstream(draft) << "draft bytes";
    saved = std::getenv("SPECCHAT_CACHE_DIR") ? std::getenv("SPECCHAT_CACHE_DIR") : "";
    ::setenv("SPECCHAT_CACHE_DIR", (dir / "cache").c_str(), 1);
    fs::create_directories(fs::path(timing_cache_path(target, draft)).parent_path());
  }
  ~CacheScratch() {
    ::setenv("SPECCHAT_CACHE_DIR", saved.c_str(), 1);
    fs::remove_all(dir);
  }
  std::string cache() const { return timing_cache_path(target, draft); }
  // A cache file for the pair holding `table` (setup 1 thread) as its only table.
  void write_table(const nlohmann::json& table) const {
    write_calibration_file(cache(), nlohmann::json{{"version", 1}, {"backend", "cpu"},
                                                   {"target", calibration_file_info(target)},
                                                   {"draft", calibration_file_info(draft)},
                                                   {"timings", table}});
  }
  bool loads() const { return load_calibration(target, draft, TimingSetup{1}).timings.valid(); }
};

}  // namespace

// The break-it pass of 2026-12-05 on the timing cache: each file below was trusted, hung the
// reader or crashed it. A cache the engine cannot use is ignored (the models are timed again).
TEST_CASE("timing cache: implausible, partial, hostile and odd cache files are not used", "[unit]") {
  CacheScratch s;
  const TimingSetup one{1};
  s.write_table(calibration_timings_json(linear_timings(1, 2, 3), one, 8, 1));
  REQUIRE(s.loads());  // the well-formed table is used
  {  // times no machine measures: 0 ms (plain decoding planned for free), 1e300 ms
    for (const double bad : {0.0, 1e300}) {
      StepTimings t = linear_timings(1, 2, 3);
      t.verify_ms[3] = bad;
      s.write_table(calibration_timings_json(t, one, 8, 1));
      INFO("a verification time of " << bad << " ms");
      CHECK_FALSE(s.loads());
      t = linear_timings(1, 2, 3);
      t.draft_ms[0] = bad;
      s.write_table(calibration_timings_json(t, one, 8, 1));
      CHECK_FALSE(s.loads());
    }
  }
  {  // measured while other programs were busy (regression: one disturbed table, cached, planned
     // every later run): cached with its disorder, not planned from again; in order, it is
    for (const double d : {kTimingNoiseRatio + 0.01, 1.6, -1.0, 0.5, std::numeric_limits<double>::quiet_NaN()}) {
      nlohmann::json table = calibration_timings_json(linear_timings(1, 2, 3), one, 8, 1, d);
      if (std::isnan(d)) table["disorder"] = "1.0";  // not a number
      s.write_table(table);
      INFO("disorder " << table["disorder"].dump());
      CHECK_FALSE(s.loads());
    }
    s.write_table(calibration_timings_json(linear_timings(1, 2, 3), one, 8, 1, kTimingNoiseRatio));
    CHECK(s.loads());
    CHECK_NOTHROW(cache_calibration_timings(s.target, s.draft, linear_timings(1, 2, 3), one, 8, 1, 1.4));
    CHECK_FALSE(s.loads());
    CHECK_NOTHROW(cache_calibration_timings(s.target, s.draft, linear_timings(1, 2, 3), one, 8, 1, 1.02));
    CHECK(s.loads());
  }
  {  // a partial table (auto caches only whole ones): it would cap every auto tree
    StepTimings t = linear_timings(1, 2, 3);
    t.verify_nodes.resize(2);
    t.verify_ms.resize(2);
    s.write_table(calibration_timings_json(t, one, 8, 1));
    CHECK_FALSE(s.loads());
  }
  {  // a thread count past int's range must not wrap onto 1 (2^32 + 1)
    nlohmann::json table = calibration_timings_json(linear_timings(1, 2, 3), one, 8, 1);
    table["threads"] = 4294967297ull;
    s.write_table(table);
    CHECK_FALSE(s.loads());
    table["threads"] = -1;
    s.write_table(table);
    CHECK_FALSE(s.loads());
  }
  {  // 200,000 nested arrays in the list: copying it recursed through the whole depth (a crash)
    std::string deep = std::string(200000, '[') + std::string(200000, ']');
    std::ofstream(s.cache()) << "{\"version\": 1, \"backend\": \"cpu\", \"target\": "
                             << calibration_file_info(s.target).dump() << ", \"draft\": "
                             << calibration_file_info(s.draft).dump() << ", \"timings_by_setup\": " << deep
                             << ", \"timings\": " << deep << "}";
    CHECK_FALSE(s.loads());
    // ... and re-timing replaces it with a usable file
    CHECK_NOTHROW(cache_calibration_timings(s.target, s.draft, linear_timings(1, 2, 3), one, 8, 1));
    CHECK(s.loads());
  }
  {  // a FIFO at the cache path: opening it for reading blocked forever
    fs::remove(s.cache());
    REQUIRE(::mkfifo(s.cache().c_str(), 0600) == 0);
    CHECK_FALSE(s.loads());
    fs::remove(s.cache());
  }
}

TEST_CASE("calibration store: a FIFO or a deeply nested calibration file beside the draft is refused, not read", "[unit]") {
  CacheScratch s;
  REQUIRE(::mkfifo(calibration_path(s.draft).c_str(), 0600) == 0);
  Calibration c = load_calibration(s.target, s.draft, TimingSetup{1});
  CHECK(c.status == Calibration::Status::unreadable);
  CHECK_THAT(c.problem, Catch::Contains("not a regular file"));
  fs::remove(calibration_path(s.draft));
  std::ofstream(calibration_path(s.draft)) << "{\"target\": " << std::string(200000, '[') << std::string(200000, ']') << "}";
  c = load_calibration(s.target, s.draft, TimingSetup{1});
  CHECK(c.status == Calibration::Status::other_files);
}

// Two writers of one file (two `--tree auto` runs finishing together) shared the temporary
// name <file>.tmp: one renamed the other's away and failed with "No such file or directory".
TEST_CASE("write_calibration_file: concurrent writers of one file all succeed", "[unit]") {
  CacheScratch s;
  const std::string path = (s.dir / "shared.json").string();
  std::atomic<int> failures{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 200; ++i) {
        try {
          write_calibration_file(path, nlohmann::json{{"writer", w}, {"i", i}});
        } catch (const std::exception&) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : writers) t.join();
  CHECK(failures.load() == 0);
  CHECK(read_file_json(path).is_object());
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(s.dir)) leftovers += e.path().filename().string().find(".tmp") != std::string::npos;
  CHECK(leftovers == 0);
}

TEST_CASE("timing tables whose times fall as the size grows are not used", "[unit][calibration]") {
  // Regression (break-it pass): a hand-edited cache with verify_ms [6, 0.28] for 0 and 64 nodes
  // made --tree auto plan 64-node trees. measure_step_timings writes non-decreasing tables; one
  // where a time exceeds a larger size's by more than 10 % is noise or by hand, and is not used
  // (auto times the models again). A smaller dip is smoothed.
  StepTimings t = linear_timings(0.1, 1.0, 0.1);
  nlohmann::json j = calibration_timings_json(t, TimingSetup{2}, 8, 1);
  CHECK(calibration_timings_from_json(j, TimingSetup{2}).valid());
  j["verify_ms"][0] = 6.0;
  CHECK_FALSE(calibration_timings_from_json(j, TimingSetup{2}).valid());
  j["verify_ms"][0] = j["verify_ms"][1].get<double>() * 1.05;
  const StepTimings smooth = calibration_timings_from_json(j, TimingSetup{2});
  REQUIRE(smooth.valid());
  CHECK(smooth.verify_ms[0] == Approx(smooth.verify_ms[1]));
  j = calibration_timings_json(t, TimingSetup{2}, 8, 1);
  j["draft_ms"][0] = 9.0;
  CHECK_FALSE(calibration_timings_from_json(j, TimingSetup{2}).valid());
  // Without 0 nodes (or draft width 1) plain decoding's time was extrapolated to 0 ms and auto
  // turned drafting off; times under 1 µs planned the same way. Both are refused.
  j = calibration_timings_json(t, TimingSetup{2}, 8, 1);
  j["verify_nodes"] = {32, 64};
  j["verify_ms"] = {0.3, 10.0};
  CHECK_FALSE(calibration_timings_from_json(j, TimingSetup{2}).valid());
  j = calibration_timings_json(t, TimingSetup{2}, 8, 1);
  j["draft_widths"] = {2, 4};
  j["draft_ms"] = {0.1, 0.2};
  CHECK_FALSE(calibration_timings_from_json(j, TimingSetup{2}).valid());
  j = calibration_timings_json(t, TimingSetup{2}, 8, 1);
  for (auto& x : j["verify_ms"]) x = 1e-300;
  for (auto& x : j["draft_ms"]) x = 1e-300;
  CHECK_FALSE(calibration_timings_from_json(j, TimingSetup{2}).valid());
}

TEST_CASE("write_calibration_file names the reason it could not write", "[unit][calibration]") {
  // Regression (break-it pass): with a folder where the file should be, the message ended in
  // "Success" (the error code was reused by the clean-up before the message was made).
  const fs::path dir = fs::temp_directory_path() / ("specchat-writefail-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "taken" / "inside");
  try {
    write_calibration_file((dir / "taken").string(), nlohmann::json::object());
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("cannot write") != std::string::npos);
    CHECK(what.find("Success") == std::string::npos);
  }
  CHECK(fs::is_directory(dir / "taken"));
  fs::remove_all(dir);
}
