#include "engine/speculative/calibration_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "engine/machine.h"
#include "engine/model.h"
#include "engine/speculative/calibration_file.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat {

namespace fs = std::filesystem;
using nlohmann::json;

std::string json_string_or(const json& j, const char* key, const std::string& dflt) {
  if (!j.is_object()) return dflt;
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : dflt;
}

const json& json_member(const json& j, const char* key) {
  static const json null_value;
  if (!j.is_object()) return null_value;
  const auto it = j.find(key);
  return it == j.end() ? null_value : *it;
}

std::string calibration_version_problem(const json& doc, int expected, const std::string& path,
                                        const std::string& rerun) {
  const json& v = json_member(doc, "version");
  // Absent: read as the current version (hand-made files; every file calibrate writes has one).
  if (v.is_null() || (v.is_number_integer() && v.get<int64_t>() == expected) ||
      (v.is_number_float() && v.get<double>() == static_cast<double>(expected))) {
    return "";  // 1.0 too: JSON writers of some languages write whole numbers so
  }
  return "calibration " + path + " has format version " + v.dump() + "; this build reads version " +
         std::to_string(expected) + " (re-run `" + rerun + "`)";
}

bool json_regular_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool calibration_describes_file(const json& stored, const std::string& path) {
  if (!stored.is_object()) return false;
  try {
    return stored.value("size", uint64_t{0}) == file_size_bytes(path) &&
           stored.value("fingerprint", std::string()) == file_fingerprint(path);
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

// The acceptance vector of a calibration object (acceptance.accept_by_rank): probabilities
// (SequoiaPlanner's contract: finite, in [0, 1]) that sum to at most 1 up to the rounding of a
// written file (a[r] is the share of positions whose target token was the draft's rank r:
// RankCounts). Empty, with the reason in *why, when absent, empty, malformed, longer than 64
// ranks, out of that contract, or of another length than the file's own `ranks` count says.
std::vector<double> acceptance_of(const json& cal, std::string* why) {
  // `calibrate --ranks` counts at most 64 ranks; a longer vector was not written by it, and the
  // Sequoia tables grow with its length (a million ranks ran out of memory).
  constexpr size_t kMaxRanks = 64;
  *why = "has no usable acceptance vector";
  try {
    const json& acc = json_member(cal, "acceptance");
    const json& list = json_member(acc, "accept_by_rank");
    if (!list.is_array() || list.size() > kMaxRanks) return {};
    std::vector<double> a = list.get<std::vector<double>>();
    if (a.empty()) {
      *why = "has an empty acceptance vector";
      return {};
    }
    double sum = 0;
    for (double x : a) {
      if (!std::isfinite(x) || x < 0 || x > 1) return {};
      sum += x;
    }
    if (sum > 1.0 + 1e-6) return {};
    // `ranks` is the R the counts were made with; a vector of another length was cut or padded
    // by hand, and its tail (or the missing ranks) would be planned as measured.
    const json& ranks = json_member(acc, "ranks");
    if (!ranks.is_null() && (!ranks.is_number_integer() || ranks.get<int64_t>() != static_cast<int64_t>(a.size()))) {
      *why = "has an acceptance vector of " + std::to_string(a.size()) + " ranks where its `ranks` says " + ranks.dump();
      return {};
    }
    why->clear();
    return a;
  } catch (const json::exception&) {
    return {};
  }
}

// True when the rank paths agree with the counts they were recorded with (acceptance.hits [R]
// and misses, else a[r] × positions): calibrate records the rank of every position it counts
// until kMaxRankPathRanks runs out, so the paths' number of each rank r (R = a miss) equals its
// count when they hold every position, and is at most that count when they hold a prefix (a
// hand-made file with neither counts nor positions is not checked). Counts out of shape or
// disagreeing with each other fail too. Paths that fail were edited or mixed from two files;
// planning from them would be planning from a measurement that did not happen (a file of
// all-miss paths with a[0] = 0.86 switched speculation off).
bool rank_paths_agree(const json& doc, const std::vector<std::vector<int8_t>>& paths, const std::vector<double>& a) {
  const json& acc = json_member(doc, "acceptance");
  const int R = static_cast<int>(a.size());
  std::vector<int64_t> hist(static_cast<size_t>(R) + 1, 0);
  int64_t total = 0;
  for (const auto& p : paths) {
    for (int8_t r : p) {
      hist[static_cast<size_t>(std::clamp<int>(r, 0, R))]++;
      ++total;
    }
  }
  if (total == 0) return true;
  // The counts: hits and misses as recorded, else from the vector and the number of positions.
  std::vector<double> count(static_cast<size_t>(R) + 1, -1.0);
  const json& hits = json_member(acc, "hits");
  const json& misses = json_member(acc, "misses");
  const json& positions = json_member(acc, "positions");
  const bool have_hits = hits.is_array() && hits.size() == a.size() &&
                         std::all_of(hits.begin(), hits.end(), [](const json& h) { return h.is_number(); });
  // Counts present but out of shape, or disagreeing with each other: nothing sound to hold the
  // paths to, and they were recorded with those counts.
  if ((!hits.is_null() && !have_hits) || (!misses.is_null() && !misses.is_number()) ||
      (!positions.is_null() && !positions.is_number())) {
    return false;
  }
  if (positions.is_number()) {
    if (static_cast<double>(total) > positions.get<double>()) return false;  // more ranks than positions
    if (have_hits && misses.is_number()) {
      double sum = misses.get<double>();
      for (const json& h : hits) sum += h.get<double>();
      if (std::abs(sum - positions.get<double>()) > 0.5) return false;
    }
  }
  if (have_hits) {
    for (int r = 0; r < R; ++r) count[static_cast<size_t>(r)] = hits[static_cast<size_t>(r)].get<double>();
    if (misses.is_number()) count[static_cast<size_t>(R)] = misses.get<double>();
  } else if (positions.is_number()) {
    double hit_sum = 0;
    for (int r = 0; r < R; ++r) {
      count[static_cast<size_t>(r)] = a[static_cast<size_t>(r)] * positions.get<double>();
      hit_sum += count[static_cast<size_t>(r)];
    }
    count[static_cast<size_t>(R)] = positions.get<double>() - hit_sum;
  } else {
    return true;  // a hand-made file without counts: nothing to hold the paths to
  }
  double counted = 0;
  for (double c : count) counted += std::max(0.0, c);
  const bool whole = positions.is_number() ? static_cast<double>(total) == positions.get<double>()
                                           : static_cast<double>(total) == counted;
  for (int r = 0; r <= R; ++r) {
    const double want = count[static_cast<size_t>(r)];
    if (want < 0) continue;  // misses not recorded
    const double got = static_cast<double>(hist[static_cast<size_t>(r)]);
    const double slack = 0.5 + 1e-6 * static_cast<double>(total);
    if (whole ? std::abs(got - want) > slack : got > want + slack) return false;
  }
  return true;
}

}  // namespace

const std::vector<int>& calibration_verify_nodes() {
  // Every node count up to 8: the kernels tile rows (a 4-node chain verifies 5 rows, one more
  // pass than 4), so times between two timed counts are not linear; --tree auto, which
  // compares chains a node apart within a few per cent, read an interpolated 3-node time and
  // chose a chain of 4 over the faster 3.
  static const std::vector<int> k = {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 64};
  return k;
}

const std::vector<int>& calibration_draft_widths() {
  static const std::vector<int> k = {1, 2, 3, 4, 6, 8, 16};
  return k;
}

std::vector<int32_t> calibration_timing_context(const std::vector<int32_t>& ctx, int n_ctx) {
  const int room = std::max(1, n_ctx - (calibration_verify_nodes().back() + 1));
  const size_t len = static_cast<size_t>(std::min(kCalibrationTimingContext, room));
  if (ctx.empty()) return {};
  if (ctx.size() >= len) return std::vector<int32_t>(ctx.end() - static_cast<std::ptrdiff_t>(len), ctx.end());
  // A short context (a one-word prompt) is repeated up to the length the timings are kept for:
  // the table is cached and serves later, longer contexts (a forward's cost does not depend on
  // which ids it reads).
  std::vector<int32_t> out;
  out.reserve(len);
  while (out.size() < len) out.push_back(ctx[out.size() % ctx.size()]);
  return out;
}

namespace {

Calibration load_calibration_unguarded(const std::string& target_path, const std::string& draft_path,
                                       const TimingSetup& setup, const std::string& path) {
  Calibration c;
  c.path = path;
  std::error_code ec;
  if (fs::exists(c.path, ec) && !json_regular_file(c.path)) {  // a FIFO would block the read
    c.status = Calibration::Status::unreadable;
    c.problem = "calibration " + c.path + " is not a regular file";
    return c;
  }
  std::ifstream in(c.path);
  if (!in) {
    c.status = Calibration::Status::missing;
    c.problem = "no calibration at " + c.path + " (run `specchat-cli calibrate`)";
    return c;
  }
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    c.status = Calibration::Status::unreadable;
    c.problem = "calibration " + c.path + " is not a JSON object";
    return c;
  }
  if (std::string v = calibration_version_problem(doc, kCalibrationVersion, c.path, "specchat-cli calibrate");
      !v.empty()) {
    c.status = Calibration::Status::unreadable;
    c.problem = std::move(v);
    return c;
  }
  if (!calibration_describes_file(json_member(doc, "target"), target_path) ||
      !calibration_describes_file(json_member(doc, "draft"), draft_path)) {
    c.status = Calibration::Status::other_files;
    c.problem = "calibration " + c.path + " was made for other model files (re-run `specchat-cli calibrate`)";
    return c;
  }
  c.status = Calibration::Status::ok;
  std::string why;
  c.accept_by_rank = acceptance_of(doc, &why);
  if (c.accept_by_rank.empty()) c.problem = "calibration " + c.path + " " + why;
  c.rank_paths = rank_paths_of(doc, static_cast<int>(c.accept_by_rank.size()));
  if (!rank_paths_agree(doc, c.rank_paths, c.accept_by_rank)) c.rank_paths.clear();
  c.rank_paths_recorded = !json_member(json_member(doc, "acceptance"), "rank_paths").is_null();
  c.timings = calibration_timings_of(doc, setup);
  c.doc = std::move(doc);
  return c;
}

// The timing cache's object for the pair, null when absent, unreadable or made for other files.
json cached_timings_doc(const std::string& path, const std::string& target_path, const std::string& draft_path) {
  if (path.empty() || !json_regular_file(path)) return json();
  std::ifstream in(path);
  if (!in) return json();
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !calibration_describes_file(json_member(doc, "target"), target_path) ||
      !calibration_describes_file(json_member(doc, "draft"), draft_path)) {
    return json();
  }
  return doc;
}

}  // namespace

std::vector<std::vector<int8_t>> rank_paths_of(const json& doc, int R) {
  if (R < 1 || R > 127) return {};
  const json& list = json_member(json_member(doc, "acceptance"), "rank_paths");
  if (!list.is_array()) return {};
  // Entries are bounded like ranks: an empty entry costs nothing to keep but still a loop.
  if (static_cast<int64_t>(list.size()) > kMaxRankPathRanks) return {};
  std::vector<std::vector<int8_t>> out;
  int64_t total = 0;
  for (const json& seq : list) {
    if (!seq.is_string()) return {};
    const std::string& text = seq.get_ref<const std::string&>();
    std::vector<int8_t> v;
    int value = -1;  // the number being read, -1 between numbers
    for (size_t i = 0; i <= text.size(); ++i) {
      const char ch = i < text.size() ? text[i] : ' ';
      if (ch >= '0' && ch <= '9') {
        value = (value < 0 ? 0 : value * 10) + (ch - '0');
        if (value > R) return {};
      } else if (ch == ' ') {
        if (value >= 0) {
          if (++total > kMaxRankPathRanks) return {};
          v.push_back(static_cast<int8_t>(value));
        }
        value = -1;
      } else {
        return {};
      }
    }
    if (!v.empty()) out.push_back(std::move(v));  // an empty prompt adds no start position
  }
  return out;
}

std::string rank_path_text(std::span<const int8_t> ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(static_cast<int>(ranks[i]));
  }
  return s;
}

namespace {

Calibration load_calibration_at(const std::string& target_path, const std::string& draft_path,
                                const TimingSetup& setup, const std::string& path) {
  try {
    return load_calibration_unguarded(target_path, draft_path, setup, path);
  } catch (const std::exception& e) {  // a shape no reader above foresaw: unreadable, never fatal
    Calibration c;
    c.path = path;
    c.status = Calibration::Status::unreadable;
    c.problem = "calibration " + c.path + " could not be read (" + e.what() + ")";
    return c;
  }
}

}  // namespace

Calibration load_calibration(const std::string& target_path, const std::string& draft_path, const TimingSetup& setup) {
  const std::string read = calibration_read_path(target_path, draft_path), beside = calibration_path(draft_path);
  Calibration c = load_calibration_at(target_path, draft_path, setup, read);
  // The user's own calibration unusable (broken, another version, made for other files): the
  // one beside the drafter still plans, and the note says why the user's was passed over
  // (regression: a broken user file hid the valid bundled calibration behind the prior).
  if (read != beside && !c.has_acceptance()) {
    Calibration b = load_calibration_at(target_path, draft_path, setup, beside);
    if (b.has_acceptance()) {
      b.note = "your calibration " + read + " is not used (" + c.problem + "); planning from " + beside;
      c = std::move(b);
    }
  }
  if (!c.timings.valid()) {
    try {
      const json cached = cached_timings_doc(timing_cache_path(target_path, draft_path), target_path, draft_path);
      c.timings = calibration_timings_of(cached, setup);
      // Auto caches only whole tables (request_planner.cpp); a partial one would cap its trees.
      if (c.timings.valid() && c.timings.verify_nodes.back() < calibration_verify_nodes().back()) c.timings = {};
      c.timings_cached = c.timings.valid();
    } catch (const std::exception&) {  // an unreadable cache is no cache
      c.timings = {};
    }
  }
  return c;
}

json calibration_file_info(const std::string& model_path) {
  return json{{"file", fs::path(model_path).filename().string()},
              {"size", file_size_bytes(model_path)},
              {"fingerprint", file_fingerprint(model_path)}};
}

int effective_threads(int threads) {
  const int cores = cpu::usable_cpu_count();  // what cpu::ThreadPool caps its threads at
  return threads <= 0 ? cores : std::min(threads, cores);
}

TimingSetup timing_setup_of(const LlamaModel& target, int threads) {
  const MemoryInfo m = target.memory();
  TimingSetup s;
  s.threads = effective_threads(threads);
  s.kv_type = m.kv_type == DType::f32 ? "f32" : "f16";
  s.activations = m.q8_activations ? "q8" : "f32";
  s.machine = cpu_machine_name();
  return s;
}

std::string describe_setup(const TimingSetup& s) {
  const int t = effective_threads(s.threads);
  return std::to_string(t) + (t == 1 ? " thread, " : " threads, ") + s.kv_type + " KV cache, " +
         s.activations + " activations" + (s.machine.empty() ? "" : " on " + s.machine);
}

namespace {

// The thread count an entry records: -1 when absent, not an integer or outside [0, 65536] (a
// value past int's range must not wrap onto a real count).
int stored_threads(const json& e) {
  const json& th = json_member(e, "threads");
  if (!th.is_number_integer()) return -1;
  const int64_t v = th.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(th.get<uint64_t>(), 1u << 20))
                                            : th.get<int64_t>();
  return v >= 0 && v <= 65536 ? static_cast<int>(v) : -1;
}

// A stored forward time is plausible: at least 1 µs (no forward of a model runs faster) and
// under 1e6 ms.
bool plausible_ms(double ms) { return std::isfinite(ms) && ms >= 1e-3 && ms <= 1e6; }

}  // namespace

TimingSetup setup_of_entry(const json& e) {
  TimingSetup s;
  if (!e.is_object()) return s;
  const auto str = [&](const char* key, const std::string& dflt) {
    const auto it = e.find(key);
    return it != e.end() && it->is_string() ? it->get<std::string>() : dflt;
  };
  s.threads = std::max(0, stored_threads(e));
  s.kv_type = str("kv_type", "f16");
  s.activations = str("activations", "f32");
  s.machine = str("machine", "");
  return s;
}

bool entry_matches_setup(const json& e, const TimingSetup& s) {
  if (!e.is_object()) return false;
  const int th = stored_threads(e);
  if (th < 0 || effective_threads(th) != effective_threads(s.threads)) return false;
  const auto same = [&](const char* key, const std::string& want) {
    const auto it = e.find(key);
    return it == e.end() || (it->is_string() && it->get<std::string>() == want);
  };
  return same("kv_type", s.kv_type) && same("activations", s.activations) && (s.machine.empty() || same("machine", s.machine));
}

json with_setup_entry(const json& list, const json& fresh) {
  const TimingSetup f = setup_of_entry(fresh);
  const std::string backend = json_string_or(fresh, "backend");
  json out = json::array();
  if (list.is_array()) {
    for (const json& e : list) {
      if (!e.is_object()) continue;
      const TimingSetup s = setup_of_entry(e);
      const bool same = effective_threads(s.threads) == effective_threads(f.threads) && s.kv_type == f.kv_type &&
                        s.activations == f.activations && s.machine == f.machine &&
                        json_string_or(e, "backend") == backend;
      if (!same) out.push_back(e);
    }
  }
  out.push_back(fresh);
  return out;
}

json calibration_timings_json(const StepTimings& t, const TimingSetup& setup, int context_tokens, int reps,
                              double disorder) {
  json j{{"backend", kCalibrationBackend}, {"threads", setup.threads},
         {"kv_type", setup.kv_type}, {"activations", setup.activations},
         {"context_tokens", context_tokens}, {"reps", reps}, {"disorder", disorder},
         {"draft_widths", t.draft_widths}, {"draft_ms", t.draft_ms},
         {"verify_nodes", t.verify_nodes}, {"verify_ms", t.verify_ms}};
  if (!setup.machine.empty()) j["machine"] = setup.machine;
  return j;
}

StepTimings calibration_timings_from_json(const json& j, const TimingSetup& setup) {
  StepTimings t;
  if (!j.is_object() || json_string_or(j, "backend") != kCalibrationBackend || stored_threads(j) < 0 ||
      effective_threads(stored_threads(j)) != effective_threads(setup.threads)) {
    return t;
  }
  // Absent in files written before they were recorded: those match any setup.
  const auto same = [&](const char* key, const std::string& want) {
    const auto it = j.find(key);
    return it == j.end() || (it->is_string() && it->get<std::string>() == want);
  };
  if (!same("kv_type", setup.kv_type) || !same("activations", setup.activations) ||
      (!setup.machine.empty() && !same("machine", setup.machine))) {
    return t;  // another setup's, or another machine's: its times do not hold here
  }
  // Measured while other programs were busy on the cores (measure_step_timings' disorder): it
  // planned the run that measured it; later runs time the models again (regression: one
  // disturbed table, cached, planned chains of 4 to 7 in every later run).
  if (const json& d = json_member(j, "disorder");
      !d.is_null() && (!d.is_number() || !(d.get<double>() >= 1.0 && d.get<double>() <= kTimingNoiseRatio))) {
    return t;
  }
  try {
    t.draft_widths = j.at("draft_widths").get<std::vector<int>>();
    t.draft_ms = j.at("draft_ms").get<std::vector<double>>();
    t.verify_nodes = j.at("verify_nodes").get<std::vector<int>>();
    t.verify_ms = j.at("verify_ms").get<std::vector<double>>();
  } catch (const json::exception&) {
    return {};
  }
  // Times no machine measures (0, or past 1e6 ms a forward) would plan nonsense trees.
  if (!std::all_of(t.draft_ms.begin(), t.draft_ms.end(), plausible_ms) ||
      !std::all_of(t.verify_ms.begin(), t.verify_ms.end(), plausible_ms)) {
    return {};
  }
  if (!t.valid()) return {};
  // Plain decoding's time (0 nodes) and one draft forward are measured, never extrapolated: a
  // table starting at 32 nodes extrapolated t_verify(0) to 0 ms and auto turned drafting off.
  if (t.verify_nodes.front() != 0 || t.draft_widths.front() != 1) return {};
  // measure_step_timings writes non-decreasing tables. One where a time exceeds a larger size's
  // by more than 10 % was measured otherwise (before that rule, or by hand) and would plan on
  // noise (a hand-made [6, 0.28] ms made auto plan 64-node trees): not used, so auto times the
  // models again. Smaller dips are smoothed.
  if (make_timings_monotone(t) > 1.10) return {};
  return t;
}

StepTimings calibration_timings_of(const json& doc, const TimingSetup& setup) {
  if (!doc.is_object()) return {};
  const json& list = json_member(doc, "timings_by_setup");
  if (list.is_array()) {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {  // the newest first
      const StepTimings t = calibration_timings_from_json(*it, setup);
      if (t.valid()) return t;
    }
  }
  return calibration_timings_from_json(json_member(doc, "timings"), setup);
}

void store_calibration_timings(json& doc, const json& table, const json& previous) {
  json list;
  if (const json& l = json_member(previous, "timings_by_setup"); l.is_array()) {
    // Only the entries a run could use are copied (a deeply nested one is not copied at all).
    list = json::array();
    for (const json& e : l) {
      if (calibration_timings_from_json(e, setup_of_entry(e)).valid()) list.push_back(e);
    }
  }
  if (!list.is_array()) {
    list = json::array();
    if (json_member(previous, "timings").is_object()) list.push_back(json_member(previous, "timings"));
  }
  // Only tables a run could use are kept: a malformed entry would stay in the file forever.
  json usable = json::array();
  for (const json& e : list) {
    if (calibration_timings_from_json(e, setup_of_entry(e)).valid()) usable.push_back(e);
  }
  doc["timings_by_setup"] = with_setup_entry(usable, table);
  doc["timings"] = table;
}

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void write_calibration_file(const std::string& path, const json& j) {
  // A name of its own per write: two processes (or threads) writing one file must not rename
  // each other's half-written temporary.
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();  // before remove() reuses ec
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write " + path + ": " + why);
  }
}

std::string cache_calibration_timings(const std::string& target_path, const std::string& draft_path,
                                      const StepTimings& t, const TimingSetup& setup, int context_tokens, int reps,
                                      double disorder) {
  const std::string path = timing_cache_path(target_path, draft_path);
  if (path.empty()) {
    throw std::runtime_error("no cache folder (set SPECCHAT_CACHE_DIR, XDG_CACHE_HOME or HOME)");
  }
  const json previous = cached_timings_doc(path, target_path, draft_path);
  // A new object: of the previous file only its usable tables are carried over
  // (store_calibration_timings), so nothing else of it, however nested, is copied.
  json updated{{"version", kCalibrationVersion}, {"backend", kCalibrationBackend}};
  updated["target"] = calibration_file_info(target_path);
  updated["draft"] = calibration_file_info(draft_path);
  json table = calibration_timings_json(t, setup, context_tokens, reps, disorder);
  table["date"] = utc_now_iso8601();
  store_calibration_timings(updated, table, previous);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + fs::path(path).parent_path().string() + ": " + ec.message());
  write_calibration_file(path, updated);
  return path;
}

}  // namespace specchat
