// The model drafter's calibration file and `--tree auto`'s timing cache
// (engine/speculative/calibration_store.h): timing tables kept per setup (threads, KV type,
// activation rounding, machine), so alternating setups do not replace each other's tables, and a
// file written before the per-setup list still serves its table.
#include <catch2/catch.hpp>

#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/machine.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"

using namespace specchat;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Two small stand-in model files (a calibration names files by size and fingerprint only).
// Its own timing cache folder too (SPECCHAT_CACHE_DIR, restored at the end), so test cases of
// one process do not share cached tables.
struct ScratchPair {
  fs::path dir;
  std::string saved_cache;
  ScratchPair() {
    dir = fs::temp_directory_path() / ("specchat-calstore-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "t.gguf") << "target bytes";
    std::ofstream(dir / "d.gguf") << "draft bytes, other";
    const char* c = std::getenv("SPECCHAT_CACHE_DIR");
    saved_cache = c ? c : "";
    ::setenv("SPECCHAT_CACHE_DIR", (dir / "cache").c_str(), 1);
  }
  ~ScratchPair() {
    ::setenv("SPECCHAT_CACHE_DIR", saved_cache.c_str(), 1);
    fs::remove_all(dir);
  }
  std::string target() const { return (dir / "t.gguf").string(); }
  std::string draft() const { return (dir / "d.gguf").string(); }
  // The timing cache's object (cache_calibration_timings), null when absent.
  json cache() const {
    std::ifstream in(timing_cache_path(target(), draft()));
    return in ? json::parse(in, nullptr, false) : json();
  }
};

// A whole table (every node count and width auto measures: the timing cache takes no other),
// draft_ms[0] = scale.
StepTimings table(double scale) {
  StepTimings t;
  t.draft_widths = calibration_draft_widths();
  for (int w : t.draft_widths) t.draft_ms.push_back(scale * (1.0 + 0.5 * (w - 1)));
  t.verify_nodes = calibration_verify_nodes();
  for (int n : t.verify_nodes) t.verify_ms.push_back(scale * (2.0 + 0.1 * n));
  return t;
}

}  // namespace

// The CPUs this process may use (its affinity mask; all cores without one): what the pool and
// effective_threads count (regression: counted with hardware_concurrency, these tests failed
// under `taskset -c 0`).
static int usable_cpus() {
#if defined(__linux__)
  cpu_set_t m;
  if (sched_getaffinity(0, sizeof m, &m) == 0 && CPU_COUNT(&m) > 0) return CPU_COUNT(&m);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("calibration store: alternating setups keep one timing table each", "[unit][calibration]") {
  // Regression: the file held one table, so timing with 1 thread and then with 2 (or f16 and
  // then f32 KV) threw the first away and the next run with the first setup re-measured.
  ScratchPair p;
  // Setups that differ on every machine (thread counts past the cores would be the same setup).
  const TimingSetup one{1, "f16", "f32"}, two{1, "f16", "q8"}, f32kv{1, "f32", "f32"};
  Calibration c = load_calibration(p.target(), p.draft(), one);
  REQUIRE(c.status == Calibration::Status::missing);
  cache_calibration_timings(p.target(), p.draft(), table(1), one, 64, 3);
  c = load_calibration(p.target(), p.draft(), two);
  CHECK(c.status == Calibration::Status::missing);  // the cache is not the calibration file
  CHECK_FALSE(c.timings.valid());
  cache_calibration_timings(p.target(), p.draft(), table(2), two, 64, 3);
  c = load_calibration(p.target(), p.draft(), f32kv);
  CHECK_FALSE(c.timings.valid());
  cache_calibration_timings(p.target(), p.draft(), table(3), f32kv, 64, 3);

  CHECK(load_calibration(p.target(), p.draft(), one).timings.draft_ms.at(0) == Approx(1.0));
  CHECK(load_calibration(p.target(), p.draft(), two).timings.draft_ms.at(0) == Approx(2.0));
  CHECK(load_calibration(p.target(), p.draft(), f32kv).timings.draft_ms.at(0) == Approx(3.0));
  // Re-timing a setup replaces its table only.
  c = load_calibration(p.target(), p.draft(), two);
  cache_calibration_timings(p.target(), p.draft(), table(5), two, 64, 3);
  c = load_calibration(p.target(), p.draft(), two);
  CHECK(c.timings.draft_ms.at(0) == Approx(5.0));
  CHECK(c.timings_cached);
  const json cache = p.cache();
  CHECK(cache["timings_by_setup"].size() == 3);
  CHECK(cache["timings"]["activations"] == "q8");  // the latest at "timings"
  CHECK(load_calibration(p.target(), p.draft(), one).timings.draft_ms.at(0) == Approx(1.0));
}

TEST_CASE("calibration store: a file with only \"timings\" keeps it when another setup is added", "[unit][calibration]") {
  ScratchPair p;
  const TimingSetup one{1, "f16", "f32"}, f32kv{1, "f32", "f32"}, q8{1, "f16", "q8"};
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"timings", calibration_timings_json(table(1), one, 64, 3)}};
  doc["timings"].erase("kv_type");  // as files written before kv_type was recorded
  write_calibration_file(calibration_path(p.draft()), doc);
  Calibration c = load_calibration(p.target(), p.draft(), one);
  REQUIRE(c.timings.valid());
  // Its table serves any KV type (not recorded), so the file's wins for f32 KV too; the cache
  // serves the setup the file has no table for.
  cache_calibration_timings(p.target(), p.draft(), table(2), q8, 64, 3);
  CHECK(load_calibration(p.target(), p.draft(), one).timings.draft_ms.at(0) == Approx(1.0));
  CHECK(load_calibration(p.target(), p.draft(), f32kv).timings.draft_ms.at(0) == Approx(1.0));
  CHECK(load_calibration(p.target(), p.draft(), q8).timings.draft_ms.at(0) == Approx(2.0));
  CHECK(load_calibration(p.target(), p.draft(), one).doc == doc);
}

TEST_CASE("calibration store: setups are described and matched", "[unit][calibration]") {
  const int cores = usable_cpus();
  CHECK(describe_setup({1, "f16", "q8"}) == "1 thread, f16 KV cache, q8 activations");
  CHECK(describe_setup({0, "f32", "f32"}) ==
        std::to_string(cores) + (cores == 1 ? " thread" : " threads") + ", f32 KV cache, f32 activations");
  const json e{{"threads", 1}, {"kv_type", "f32"}};
  CHECK(entry_matches_setup(e, {1, "f32", "f32"}));
  CHECK(entry_matches_setup(e, {1, "f32", "q8"}));  // activations not recorded: any
  CHECK_FALSE(entry_matches_setup(e, {1, "f16", "f32"}));
  CHECK_FALSE(entry_matches_setup(json{{"kv_type", "f32"}}, {0, "f32", "f32"}));  // no thread count
  const TimingSetup s = setup_of_entry(e);
  CHECK(s.threads == 1);
  CHECK(s.kv_type == "f32");
  CHECK(s.activations == "f32");
}

TEST_CASE("calibration store: thread counts match as the pool runs them", "[unit][calibration]") {
  // Regression: --threads 0 (every core), the core count and more than the cores run the same
  // pool, but were three setups: a calibration made with one was not used by the others.
  const int cores = usable_cpus();
  CHECK(effective_threads(0) == cores);
  CHECK(effective_threads(-3) == cores);
  CHECK(effective_threads(cores + 6) == cores);
  CHECK(effective_threads(1) == 1);
  for (int stored : {0, cores, cores + 6}) {
    const json e{{"threads", stored}, {"kv_type", "f16"}, {"activations", "f32"}};
    for (int asked : {0, cores, cores + 6}) CHECK(entry_matches_setup(e, {asked, "f16", "f32"}));
    const json t = calibration_timings_json(table(1), {stored, "f16", "f32"}, 64, 3);
    CHECK(calibration_timings_from_json(t, {0, "f16", "f32"}).valid());
    // One entry per setup: the same pool is the same setup.
    CHECK(with_setup_entry(json::array({t}), calibration_timings_json(table(2), {0, "f16", "f32"}, 64, 3)).size() == 1);
  }
}

TEST_CASE("calibration store: values of the wrong JSON type are ignored and never thrown", "[unit][calibration]") {
  // Regression: `"backend": 5` in a timing table made nlohmann's value() throw type_error out
  // of load_calibration (documented "never throws"), and generate, chat, compare and serve
  // exited with the raw exception instead of re-measuring.
  ScratchPair p;
  const TimingSetup one{1, "f16", "f32"};
  json bad = calibration_timings_json(table(1), one, 64, 3);
  bad["backend"] = 5;
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"acceptance", {{"accept_by_rank", {0.5, 0.2}}}},
           {"timings", bad},
           {"timings_by_setup", json::array({json{{"backend", 5}, {"threads", 1}}, bad,
                                             json{{"backend", "cpu"}, {"threads", "one"}}})}};
  write_calibration_file(calibration_path(p.draft()), doc);
  Calibration c;
  REQUIRE_NOTHROW(c = load_calibration(p.target(), p.draft(), one));
  CHECK(c.status == Calibration::Status::ok);
  CHECK(c.has_acceptance());
  CHECK_FALSE(c.timings.valid());  // nothing usable: the caller re-measures
  CHECK_NOTHROW(calibration_timings_from_json(bad, one));
  CHECK_FALSE(calibration_timings_from_json(bad, one).valid());
  CHECK_NOTHROW(with_setup_entry(doc["timings_by_setup"], calibration_timings_json(table(2), one, 64, 3)));

  // The file's own identity fields of the wrong type: made for other files, not a throw.
  doc["target"]["size"] = "big";
  write_calibration_file(calibration_path(p.draft()), doc);
  REQUIRE_NOTHROW(c = load_calibration(p.target(), p.draft(), one));
  CHECK(c.status == Calibration::Status::other_files);
}

TEST_CASE("calibration store: re-timing drops entries that are not timing tables", "[unit][calibration]") {
  // Regression: `calibrate` kept a malformed entry of the list in the file it rewrote, so the
  // file stayed broken however often it was re-made. The timing cache is rewritten the same way.
  ScratchPair p;
  const TimingSetup one{1, "f16", "f32"}, two{1, "f32", "f32"};
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"timings_by_setup", json::array({json{{"backend", 5}, {"threads", 1}}, json("text"),
                                             calibration_timings_json(table(2), two, 64, 3)})}};
  fs::create_directories(fs::path(timing_cache_path(p.target(), p.draft())).parent_path());
  write_calibration_file(timing_cache_path(p.target(), p.draft()), doc);
  cache_calibration_timings(p.target(), p.draft(), table(1), one, 64, 3);
  const Calibration c = load_calibration(p.target(), p.draft(), one);
  const json cache = p.cache();
  REQUIRE(cache["timings_by_setup"].is_array());
  CHECK(cache["timings_by_setup"].size() == 2);  // the other setup's table and the new one
  CHECK(c.timings.draft_ms.at(0) == Approx(1.0));
  CHECK(load_calibration(p.target(), p.draft(), two).timings.draft_ms.at(0) == Approx(2.0));
}

TEST_CASE("calibration store: an acceptance vector that sums past 1 is refused", "[unit][calibration]") {
  // Regression: 64 ranks of 1.0 were taken as they stood (each value is in [0, 1]), and
  // `--tree auto` / `--tree optimal` planned huge trees on acceptance no drafter can have: a[r]
  // is the share of positions whose target token was the draft's rank r, so the ranks sum to
  // at most 1.
  ScratchPair p;
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"acceptance", {{"accept_by_rank", std::vector<double>(64, 1.0)}}}};
  write_calibration_file(calibration_path(p.draft()), doc);
  Calibration c = load_calibration(p.target(), p.draft(), {1, "f16", "f32"});
  CHECK(c.status == Calibration::Status::ok);
  CHECK_FALSE(c.has_acceptance());
  CHECK(c.problem.find("no usable acceptance") != std::string::npos);
  // Rounding in a written file is not a reason to refuse it.
  doc["acceptance"]["accept_by_rank"] = {0.7, 0.2, 0.1000000001};
  write_calibration_file(calibration_path(p.draft()), doc);
  c = load_calibration(p.target(), p.draft(), {1, "f16", "f32"});
  CHECK(c.has_acceptance());
}

TEST_CASE("calibration store: an acceptance vector longer than calibrate counts is refused", "[unit][calibration]") {
  // Regression: a million ranks of 1e-6 (summing to 1) passed the checks, and the Sequoia
  // tables --tree auto builds from them ran out of memory (std::bad_alloc, no file named).
  ScratchPair p;
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"acceptance", {{"accept_by_rank", std::vector<double>(65, 1.0 / 65)}}}};
  write_calibration_file(calibration_path(p.draft()), doc);
  Calibration c = load_calibration(p.target(), p.draft(), {1, "f16", "f32"});
  CHECK_FALSE(c.has_acceptance());
  CHECK(c.problem.find(calibration_path(p.draft())) != std::string::npos);
  doc["acceptance"]["accept_by_rank"] = std::vector<double>(64, 1.0 / 64);  // calibrate --ranks 64
  write_calibration_file(calibration_path(p.draft()), doc);
  c = load_calibration(p.target(), p.draft(), {1, "f16", "f32"});
  CHECK(c.accept_by_rank.size() == 64);
}

TEST_CASE("calibration store: timings run on a full-length context even after a short prompt", "[unit][calibration]") {
  // Regression: the first --tree auto run after a one-word prompt timed the models on 2 tokens
  // of context and cached that table, which every later (longer) run then planned from.
  const std::vector<int32_t> shortp = {1, 7, 9};
  const std::vector<int32_t> t = calibration_timing_context(shortp, 1024);
  REQUIRE(static_cast<int>(t.size()) == kCalibrationTimingContext);
  for (size_t i = 0; i < t.size(); ++i) CHECK(t[i] == shortp[i % shortp.size()]);
  std::vector<int32_t> longp(300);
  for (size_t i = 0; i < longp.size(); ++i) longp[i] = static_cast<int32_t>(i);
  const std::vector<int32_t> tail = calibration_timing_context(longp, 1024);
  REQUIRE(static_cast<int>(tail.size()) == kCalibrationTimingContext);
  CHECK(tail.back() == 299);  // the last tokens of a long context
  CHECK(calibration_timing_context(shortp, 8).size() == 1);  // a tiny context keeps room to verify
  CHECK(calibration_timing_context({}, 1024).empty());
}

TEST_CASE("calibration store: timing tables name their machine and another machine's table is not used", "[unit][calibration]") {
  // Regression: the committed calibration's timing table (measured on the development VM with
  // the kernels of 2026-12-02: 0.88 ms for a one-row forward that now takes 0.36-0.57 ms) planned
  // every machine's --tree auto, whatever its CPU.
  ScratchPair p;
  TimingSetup here{1, "f16", "f32", "This CPU, 2 logical cores"};
  TimingSetup there = here;
  there.machine = "Another CPU, 64 logical cores";
  const json e = calibration_timings_json(table(1), here, 64, 3);
  CHECK(e["machine"] == here.machine);
  CHECK(calibration_timings_from_json(e, here).valid());
  CHECK_FALSE(calibration_timings_from_json(e, there).valid());
  CHECK(entry_matches_setup(e, here));
  CHECK_FALSE(entry_matches_setup(e, there));
  CHECK(setup_of_entry(e).machine == here.machine);
  CHECK(describe_setup(here) == "1 thread, f16 KV cache, f32 activations on This CPU, 2 logical cores");
  // A table written before the machine was recorded still serves (as kv_type and activations).
  json old = e;
  old.erase("machine");
  CHECK(calibration_timings_from_json(old, there).valid());
  // Each machine keeps its own table in one cache (a home folder shared between machines).
  Calibration c = load_calibration(p.target(), p.draft(), here);
  cache_calibration_timings(p.target(), p.draft(), table(1), here, 64, 3);
  c = load_calibration(p.target(), p.draft(), there);
  CHECK_FALSE(c.timings.valid());  // there, the first --tree auto times the models
  cache_calibration_timings(p.target(), p.draft(), table(2), there, 64, 3);
  CHECK(load_calibration(p.target(), p.draft(), here).timings.draft_ms.at(0) == Approx(1.0));
  CHECK(load_calibration(p.target(), p.draft(), there).timings.draft_ms.at(0) == Approx(2.0));
}

TEST_CASE("calibration store: this machine's setup names its CPU, and the bundled calibration holds no unnamed timings", "[unit][calibration]") {
  const std::string m = cpu_machine_name();
  CHECK_FALSE(m.empty());
  CHECK(m.find("logical core") != std::string::npos);
  // The committed file must not carry a timing table without its machine: it would plan every
  // user's --tree auto with the development machine's times.
  std::ifstream in(std::string(SPECCHAT_SOURCE_DIR) + "/resources/models/specchat-draft.calibration.json");
  REQUIRE(in);
  const json doc = json::parse(in);
  CHECK(doc.contains("acceptance"));
  for (const char* key : {"timings"}) {
    if (doc.contains(key)) CHECK(doc[key].contains("machine"));
  }
  if (doc.contains("timings_by_setup")) {
    for (const json& t : doc["timings_by_setup"]) CHECK(t.contains("machine"));
  }
}

#if defined(__linux__)
// Regression: counted with hardware_concurrency, a run under `taskset -c 0` (a one-thread pool)
// was filed as a 2-thread setup on a 2-core machine.
TEST_CASE("calibration store: the thread count follows the CPUs the process may use", "[unit][calibration]") {
  cpu_set_t all, one;
  REQUIRE(sched_getaffinity(0, sizeof all, &all) == 0);
  int c = 0;
  while (!CPU_ISSET(c, &all)) ++c;
  CPU_ZERO(&one);
  CPU_SET(c, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  const int limited = effective_threads(0), asked = effective_threads(4);
  REQUIRE(sched_setaffinity(0, sizeof all, &all) == 0);
  CHECK(limited == 1);
  CHECK(asked == 1);
  CHECK(effective_threads(0) == CPU_COUNT(&all));
}
#endif

TEST_CASE("calibration store: caching timings leaves the calibration file and its date alone and dates the table", "[unit][calibration]") {
  // Regression (break-it pass, 2026-12-05): `--tree auto` on a new machine replaced the file's
  // top-level "date" (when `calibrate` measured the acceptance) with the time it cached timings.
  ScratchPair p;
  const std::string measured = "2026-12-02T01:33:59Z";
  json doc{{"version", kCalibrationVersion},
           {"date", measured},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"acceptance", {{"accept_by_rank", {0.7, 0.2}}}}};
  write_calibration_file(calibration_path(p.draft()), doc);
  const TimingSetup one{1, "f16", "f32"};
  cache_calibration_timings(p.target(), p.draft(), table(1), one, 64, 3);
  const Calibration c = load_calibration(p.target(), p.draft(), one);
  REQUIRE(c.timings.valid());
  CHECK(c.timings_cached);
  CHECK(c.doc == doc);  // the calibration file is not written at all
  const json cache = p.cache();
  REQUIRE(cache["timings"].contains("date"));
  CHECK(cache["timings"]["date"].get<std::string>() != measured);
}

TEST_CASE("calibration store: rank paths are read back, and refused when out of shape", "[unit][calibration]") {
  ScratchPair p;
  const std::vector<int8_t> a = {0, 0, 1, 8, 0}, b = {3, 0};
  CHECK(rank_path_text(a) == "0 0 1 8 0");
  CHECK(rank_path_text(std::vector<int8_t>{}).empty());
  json doc{{"version", kCalibrationVersion},
           {"target", calibration_file_info(p.target())},
           {"draft", calibration_file_info(p.draft())},
           {"acceptance",
            {{"accept_by_rank", std::vector<double>(8, 0.1)}, {"rank_paths", {rank_path_text(a), rank_path_text(b)}}}}};
  write_calibration_file(calibration_path(p.draft()), doc);
  Calibration c = load_calibration(p.target(), p.draft(), {1, "f16", "f32"});
  REQUIRE(c.rank_paths.size() == 2);
  CHECK(c.rank_paths[0] == a);
  CHECK(c.rank_paths[1] == b);
  CHECK(rank_paths_of(doc, 8) == c.rank_paths);
  // Spaces around and between numbers are fine.
  CHECK(rank_paths_of(json{{"acceptance", {{"rank_paths", {"  0  2 "}}}}}, 8) == std::vector<std::vector<int8_t>>{{0, 2}});
  // Anything out of shape: the planner falls back to the vector (no throw, no partial paths).
  for (const json& bad : {json{"0 9"},              // rank past R = 8
                          json{"0 -1"},             // not a digit
                          json{"0,1"},              // another separator
                          json{"99999999999999"},   // overflows nothing: refused as past R
                          json{json::array({0, 1})},  // numbers instead of text
                          json{"0 1", 7},
                          json("0 1")}) {           // not a list
    INFO(bad.dump());
    json d = doc;
    d["acceptance"]["rank_paths"] = bad;
    CHECK(rank_paths_of(d, 8).empty());
  }
  CHECK(rank_paths_of(doc, 0).empty());
  CHECK(rank_paths_of(doc, 200).empty());
  CHECK(rank_paths_of(json(), 8).empty());
  // Empty entries (a prompt that produced nothing) add nothing; past kMaxRankPathRanks entries,
  // empty or not, the list is refused (twenty million "" took 750 MB and seconds).
  CHECK(rank_paths_of(json{{"acceptance", {{"rank_paths", {"", "  ", "0 1"}}}}}, 8) ==
        std::vector<std::vector<int8_t>>{{0, 1}});
  json blanks{{"acceptance", {{"rank_paths", std::vector<std::string>(static_cast<size_t>(kMaxRankPathRanks) + 1, "")}}}};
  CHECK(rank_paths_of(blanks, 8).empty());
  CHECK(rank_paths_of(json{{"acceptance", 3}}, 8).empty());
  // At most kMaxRankPathRanks ranks in all.
  std::string many;
  for (int64_t i = 0; i < kMaxRankPathRanks; ++i) many += "0 ";
  json big{{"acceptance", {{"rank_paths", {many}}}}};
  CHECK(rank_paths_of(big, 8).size() == 1);
  big["acceptance"]["rank_paths"].push_back("0");
  CHECK(rank_paths_of(big, 8).empty());
}

TEST_CASE("calibration store: another format version, a ranks count that disagrees and contradicting rank paths are not planned from",
          "[unit][calibration]") {
  // Regression (break-it pass of 2026-12-05): a calibration of an unknown `version`, one whose
  // acceptance vector had another length than its `ranks`, and one whose rank paths contradicted
  // its acceptance counts were all planned from silently.
  ScratchPair p;
  const TimingSetup one{1, "f16", "f32"};
  // Two prompts, 5 positions: ranks 0 0 1 2(miss) | 0; R = 2.
  const json good{{"version", kCalibrationVersion},
                  {"target", calibration_file_info(p.target())},
                  {"draft", calibration_file_info(p.draft())},
                  {"acceptance",
                   {{"ranks", 2},
                    {"accept_by_rank", {0.6, 0.2}},
                    {"hits", {3, 1}},
                    {"misses", 1},
                    {"positions", 5},
                    {"rank_paths", {"0 0 1 2", "0"}}}}};
  write_calibration_file(calibration_path(p.draft()), good);
  Calibration c = load_calibration(p.target(), p.draft(), one);
  REQUIRE(c.status == Calibration::Status::ok);
  CHECK(c.accept_by_rank == std::vector<double>{0.6, 0.2});
  CHECK(c.rank_paths.size() == 2);
  CHECK(c.problem.empty());

  SECTION("another format version is refused with the reason; none is read as current") {
    json doc = good;
    doc.erase("version");
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).has_acceptance());
    for (const json& v : {json(kCalibrationVersion + 1), json(0), json("1"), json(1.5)}) {
      doc["version"] = v;
      write_calibration_file(calibration_path(p.draft()), doc);
      c = load_calibration(p.target(), p.draft(), one);
      INFO(c.problem);
      CHECK(c.status == Calibration::Status::unreadable);
      CHECK_FALSE(c.has_acceptance());
      CHECK(c.problem.find("version") != std::string::npos);
      CHECK(c.problem.find("specchat-cli calibrate") != std::string::npos);
    }
  }
  SECTION("an acceptance vector of another length than its ranks count is not used") {
    json doc = good;
    doc["acceptance"]["ranks"] = 3;
    write_calibration_file(calibration_path(p.draft()), doc);
    c = load_calibration(p.target(), p.draft(), one);
    INFO(c.problem);
    CHECK(c.status == Calibration::Status::ok);
    CHECK_FALSE(c.has_acceptance());
    CHECK(c.problem.find("ranks") != std::string::npos);
  }
  SECTION("rank paths that contradict the counts are dropped, the vector stays") {
    json doc = good;
    doc["acceptance"]["rank_paths"] = {"1 1 1 2", "0"};  // all 5 positions, hits 1 / 3 against 3 / 1
    write_calibration_file(calibration_path(p.draft()), doc);
    c = load_calibration(p.target(), p.draft(), one);
    CHECK(c.has_acceptance());
    CHECK(c.rank_paths.empty());
    CHECK(c.rank_paths_recorded);  // so the planner says they were not used
    // A recorded prefix (fewer ranks than positions: calibrate stops recording at its cap) is kept.
    doc["acceptance"]["rank_paths"] = {"0 0 1 2"};
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.size() == 1);
    // A "prefix" with more of a rank than was counted is not one (break-it: all-miss paths with
    // a[0] = 0.86 switched speculation off without a word).
    doc["acceptance"]["rank_paths"] = {"2 2", "2"};
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.empty());
    // Without positions the counts (hits, misses) still hold them; without those, the vector.
    doc["acceptance"].erase("positions");
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.empty());
    doc["acceptance"]["positions"] = 5;
    doc["acceptance"].erase("hits");
    doc["acceptance"].erase("misses");
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.empty());
    doc["acceptance"]["rank_paths"] = {"0 0 1 2", "0"};  // a[r] x positions: 3 and 1 hits, 1 miss
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.size() == 2);
  }
  SECTION("counts that disagree with the paths or with each other drop the paths") {
    json doc = good;
    doc["acceptance"]["positions"] = 4;  // the paths hold 5 ranks
    write_calibration_file(calibration_path(p.draft()), doc);
    c = load_calibration(p.target(), p.draft(), one);
    CHECK(c.has_acceptance());
    CHECK(c.rank_paths.empty());
    doc["acceptance"]["positions"] = 6;  // hits 3 + 1 and 1 miss are 5
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.empty());
    doc["acceptance"]["positions"] = 5;
    doc["acceptance"]["hits"] = {3};  // cut: rank 1 can no longer be checked
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).rank_paths.empty());
  }
  SECTION("an empty acceptance vector says so") {
    json doc = good;
    doc["acceptance"]["ranks"] = 0;
    doc["acceptance"]["accept_by_rank"] = json::array();
    write_calibration_file(calibration_path(p.draft()), doc);
    c = load_calibration(p.target(), p.draft(), one);
    CHECK_FALSE(c.has_acceptance());
    CHECK(c.problem.find("empty acceptance vector") != std::string::npos);
  }
  SECTION("version 1.0 is version 1") {
    json doc = good;
    doc["version"] = 1.0;
    write_calibration_file(calibration_path(p.draft()), doc);
    CHECK(load_calibration(p.target(), p.draft(), one).has_acceptance());
  }
  SECTION("a broken calibration of the user's own gives way to the one beside the drafter, with a note") {
    // The user's own file in the cache is read for bundled (or read-only) drafters only: make
    // the scratch folder the bundled one.
    const char* models = std::getenv("SPECCHAT_MODELS");
    const std::string saved_models = models ? models : "";
    ::setenv("SPECCHAT_MODELS", p.dir.c_str(), 1);
    struct Restore {
      bool had;
      std::string value;
      ~Restore() {
        if (had) {
          ::setenv("SPECCHAT_MODELS", value.c_str(), 1);
        } else {
          ::unsetenv("SPECCHAT_MODELS");
        }
      }
    } restore{models != nullptr, saved_models};
    const std::string own = user_calibration_path(p.target(), p.draft());
    REQUIRE_FALSE(own.empty());
    fs::create_directories(fs::path(own).parent_path());
    json mine = good;
    mine["acceptance"]["accept_by_rank"] = {0.3, 0.1};
    mine["acceptance"]["hits"] = {3, 1};
    mine["acceptance"].erase("rank_paths");
    write_calibration_file(own, mine);
    c = load_calibration(p.target(), p.draft(), one);
    CHECK(c.path == own);
    CHECK(c.accept_by_rank == std::vector<double>{0.3, 0.1});
    CHECK(c.note.empty());
    for (const std::string& broken : {std::string("{\"version\": 2}"), std::string("{ not json"), std::string("")}) {
      std::ofstream(own, std::ios::trunc) << broken;
      c = load_calibration(p.target(), p.draft(), one);
      INFO(broken << " -> " << c.note);
      CHECK(c.path == calibration_path(p.draft()));
      CHECK(c.accept_by_rank == std::vector<double>{0.6, 0.2});
      CHECK(c.note.find(own) != std::string::npos);
    }
    fs::remove(own);
    CHECK(load_calibration(p.target(), p.draft(), one).note.empty());
  }
}
