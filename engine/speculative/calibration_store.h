// A model pair's calibration file as JSON (issue 3; format in app/cli/calibrate.h): the one
// reader behind tree planning (RequestPlanner::plan_tree, engine/runtime/request_planner.h) and
// the writing helpers of `specchat-cli calibrate` and of the timings cache of `--tree auto`.
// It needs nlohmann-json, so it is built with the front-end library (engine/CMakeLists.txt),
// not with the engine core; the file-level conventions (path, fingerprint) are in
// engine/speculative/calibration_file.h.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/speculative/budget.h"

namespace specchat {

inline constexpr int kCalibrationVersion = 1;
// The backend timings are recorded for (timings of other backends are ignored).
inline constexpr const char* kCalibrationBackend = "cpu";
// Verification sizes N and draft widths w that are timed (issue 3); the budget search of
// `--tree auto` stays within them and within kCalibrationMaxAutoNodes.
const std::vector<int>& calibration_verify_nodes();  // {0, 1, …, 8, 12, 16, 24, 32, 64}
const std::vector<int>& calibration_draft_widths();  // {1, 2, 3, 4, 6, 8, 16}
inline constexpr int kCalibrationMaxAutoNodes = 64;
inline constexpr int kCalibrationTimingContext = 256;  // tokens of real context timings run on

// The context timings run on: the last kCalibrationTimingContext tokens of `ctx` (a shorter
// ctx repeated up to that length), fewer when the context (n_ctx) must keep room for the
// largest verification. Returns [n] ids, n ≥ 1 when ctx is not empty; empty for an empty ctx.
std::vector<int32_t> calibration_timing_context(const std::vector<int32_t>& ctx, int n_ctx);

// What a timing table was measured with, beside the backend: the thread count, the KV cache's
// element type and whether the target's quantized matrices round activations to 8 bits (the
// integer path, LlamaModel::Options::activations). A table is used only for the same setup.
struct TimingSetup {
  TimingSetup() = default;
  TimingSetup(int threads_, std::string kv_type_ = "f16", std::string activations_ = "f32", std::string machine_ = {})
      : threads(threads_), kv_type(std::move(kv_type_)), activations(std::move(activations_)), machine(std::move(machine_)) {}
  int threads = 0;
  std::string kv_type = "f16";      // "f16" | "f32" (MemoryInfo::kv_type)
  std::string activations = "f32";  // "q8": rounded (MemoryInfo::q8_activations) | "f32"
  // The CPU the times were measured on (cpu_machine_name(), engine/machine.h); "" = not
  // recorded (files written before it was) or, in a setup asked for, any machine. Times
  // measured on another machine do not hold here: a copied or committed calibration file must
  // not plan this machine's trees.
  std::string machine;
};

class LlamaModel;
// The threads a pool asked for `threads` runs (cpu::ThreadPool's rule): ≤ 0 = every usable CPU
// (cpu::usable_cpu_count(): the affinity mask), more than those capped at their count. Setups
// are matched on it, so --threads 0, the core count and more all name the same setup (entries
// written with 0 included).
int effective_threads(int threads);
// The setup `target` runs with now (its KV type and activation rounding) on `threads`
// (recorded as effective_threads), on this machine (cpu_machine_name()).
TimingSetup timing_setup_of(const LlamaModel& target, int threads);

// j[key] when j is an object whose `key` holds a string, else `dflt` (absent, another type, j
// not an object). Never throws: nlohmann's value() throws type_error on a mismatched type, and
// calibration files are user-editable.
std::string json_string_or(const nlohmann::json& j, const char* key, const std::string& dflt = {});
// j[key] by reference (a null value when j is not an object or lacks the key): never a copy, so
// a deeply nested value in a hostile file cannot exhaust the stack in a recursive copy.
const nlohmann::json& json_member(const nlohmann::json& j, const char* key);
// "" when the calibration object `doc` has "version": `expected` (an integer, or 1.0) or no "version"
// (a hand-made file, read as current); else why it is not read, naming `path` and the command
// that writes a current one (`rerun`): a file of another format version is refused rather than
// read as if it were current.
std::string calibration_version_problem(const nlohmann::json& doc, int expected, const std::string& path,
                                        const std::string& rerun);
// True when `path` is a regular file (not a FIFO, a device or a folder, whose read could block
// or fail oddly); false when it is absent or cannot be examined.
bool json_regular_file(const std::string& path);

// "2 threads, f16 KV cache, f32 activations on AMD EPYC, 2 logical cores" (the machine when
// recorded): for notes that name a setup.
std::string describe_setup(const TimingSetup& s);
// The setup an entry of a calibration file was measured with: its "threads", "kv_type",
// "activations" and "machine" (absent in files written before they were recorded: the defaults,
// machine "").
TimingSetup setup_of_entry(const nlohmann::json& entry);
// Whether an entry is for `s`: same effective thread count, and same KV type, activation
// rounding and machine where the entry records them (an older entry without them matches any).
bool entry_matches_setup(const nlohmann::json& entry, const TimingSetup& s);
// A file keeps one measurement per setup (a user who alternates thread counts or KV types keeps
// both): `list` (a JSON array of entries, anything else = none) without the entries of
// `fresh`'s setup (setup_of_entry, compared in full), then `fresh`. Order: oldest first.
nlohmann::json with_setup_entry(const nlohmann::json& list, const nlohmann::json& fresh);

// What the calibration beside a pair's draft offers for planning.
struct Calibration {
  enum class Status {
    ok,           // a JSON object made for these two model files
    missing,      // no file
    unreadable,   // not JSON, not an object, or of another format version (kCalibrationVersion)
    other_files,  // made for other model files (size or fingerprint differ)
  };
  std::string path;                    // where it was looked for (calibration_path of the draft)
  Status status = Status::missing;
  // Why accept_by_rank is empty, in words without a final period ("no calibration at P (run
  // `specchat-cli calibrate`)"); "" when it is usable.
  std::string problem;
  // When the user's own calibration (user_calibration_path) exists but has no usable acceptance
  // and the one beside the drafter was read instead: why, in words without a final period; a
  // plan shows it as a warning. "" otherwise.
  std::string note;
  std::vector<double> accept_by_rank;  // [R] a[r], each finite in [0, 1]; empty = none usable
  // acceptance.rank_paths: [n_prompts][len] the draft rank of each greedy target token, R for a
  // miss (RankPathModel, engine/speculative/rank_paths.h); empty when the file has none (written
  // before they were recorded) or they are unusable (see rank_paths_of).
  std::vector<std::vector<int8_t>> rank_paths;
  bool rank_paths_recorded = false;  // the file has acceptance.rank_paths (usable or not)
  // For this backend and setup: the calibration file's table, else the timing cache's
  // (timing_cache_path; timings_cached); !valid() = none.
  StepTimings timings;
  bool timings_cached = false;
  nlohmann::json doc;                  // the file's object when status is ok, else null

  bool has_acceptance() const { return !accept_by_rank.empty(); }
};

// Most ranks a calibration's rank_paths may hold in all (calibrate stops recording there): the
// RankPathModel built from them stays small whatever a file says.
inline constexpr int64_t kMaxRankPathRanks = 65536;
// acceptance.rank_paths of a calibration object whose acceptance vector has R ranks: a list of
// strings, one per prompt, each the ranks in order as decimal integers in [0, R] separated by
// spaces ("0 0 1 0 8"; one line per prompt in the written file), at most kMaxRankPathRanks in
// all. Empty when absent, when R is not in [1, 127], or when anything is out of shape (the
// planner then uses the acceptance vector alone). Never throws.
std::vector<std::vector<int8_t>> rank_paths_of(const nlohmann::json& doc, int R);
// One prompt's ranks in rank_paths_of's text form.
std::string rank_path_text(std::span<const int8_t> ranks);

// Reads the calibration of the pair (target_path, draft_path) from calibration_read_path.
// `setup` selects the timings (calibration_timings_from_json); when the file has none for it
// (or there is no usable file), those `--tree auto` cached for this pair and setup
// (timing_cache_path; only a whole table with plausible times) are taken. Never throws: every problem is a status and a `problem` text.
Calibration load_calibration(const std::string& target_path, const std::string& draft_path, const TimingSetup& setup);

// Whether a stored {"size", "fingerprint"} entry (calibration_file_info) describes the file at
// `path` now. Never throws: an unreadable file or a malformed entry is false.
bool calibration_describes_file(const nlohmann::json& stored, const std::string& path);

// {"file": name, "size": bytes, "fingerprint": file_fingerprint} of a model file. Throws
// std::filesystem::filesystem_error / std::runtime_error when it cannot be read.
nlohmann::json calibration_file_info(const std::string& model_path);
// {"backend", "threads", "kv_type", "activations", "context_tokens", "reps", "draft_widths",
// "draft_ms", "verify_nodes", "verify_ms"} (times in ms per forward).
nlohmann::json calibration_timings_json(const StepTimings& t, const TimingSetup& setup, int context_tokens, int reps,
                                        double disorder = 1.0);
// The inverse, for this backend and `setup`; an invalid (empty) table when the entry is for
// another backend, thread count, KV type or activation rounding, or malformed, when it lacks
// 0 nodes or draft width 1 (those are measured, never extrapolated), when a time is outside
// [1 µs, 1e6 ms], or when a time exceeds a larger size's by more than 10 % (smaller dips are
// smoothed: make_timings_monotone). An entry written
// before kv_type / activations were recorded matches any value of the key it lacks.
StepTimings calibration_timings_from_json(const nlohmann::json& j, const TimingSetup& setup);
// The timings of a calibration object for `setup`: from its "timings_by_setup" list (one table
// per setup), else from "timings" (the latest table; the only one in files written before the
// list). Invalid (empty) when none is for this setup.
StepTimings calibration_timings_of(const nlohmann::json& doc, const TimingSetup& setup);
// Puts a table (calibration_timings_json) into a calibration object: "timings" becomes it, and
// "timings_by_setup" keeps it beside the tables of other setups (with_setup_entry; a file with
// only "timings" has that table carried into the list). `previous`: the file's object before
// this write (null = none), whose tables of other setups are kept.
void store_calibration_timings(nlohmann::json& doc, const nlohmann::json& table, const nlohmann::json& previous);
// The current UTC time as "YYYY-MM-DDTHH:MM:SSZ".
std::string utc_now_iso8601();
// Writes `j` (indented) through a temporary file and a rename, so readers never see half a
// file. Throws std::runtime_error when it cannot be written.
void write_calibration_file(const std::string& path, const nlohmann::json& j);
// Where `--tree auto` keeps the timings it measures (never in the calibration file beside the
// draft, which may be read-only, e.g. installed models, or tracked in a repository):
// $SPECCHAT_CACHE_DIR, else $XDG_CACHE_HOME/specchat, else $HOME/.cache/specchat (relative
// values are ignored, as the XDG rule says); "" when none of them is set.
std::string timing_cache_dir();
// The timing cache of one pair of model files: <timing_cache_dir()>/timings/<draft file name
// without .gguf>-<draft's file_fingerprint>-<target's file_fingerprint>-t4.json (t4: the timing
// method of measure_step_timings and its sizes; files of an earlier method are not read; one draft used with
// two targets keeps two caches), a calibration object with timing tables only (target, draft,
// timings_by_setup, timings). "" when there is no cache folder or a model cannot be read.
std::string timing_cache_path(const std::string& target_path, const std::string& draft_path);
// A user's own calibration of a pair whose drafter's folder it may not be written to: the
// bundled models (their calibration ships with them and is tracked in the repository; a user's
// run must not replace it) or a read-only folder (an installed program).
// <timing_cache_dir()>/calibrations/<drafter file name without .gguf>-<drafter's
// file_fingerprint>-<target's file_fingerprint>.calibration.json; "" when there is no cache
// folder or a model file cannot be read.
std::string user_calibration_path(const std::string& target_path, const std::string& drafter_path);
// The calibration a plan reads for the pair (draft model, block drafter or MTP head alike):
// where calibrate writes (calibration_write_path): beside a drafter of the user's own in a
// writable folder; for a bundled or read-only one, user_calibration_path when that file exists
// (the user measured this pair on this machine), else the one beside the drafter (e.g. the
// bundled one).
std::string calibration_read_path(const std::string& target_path, const std::string& drafter_path);
// True when `path` names a file directly in bundled_models_dir() (the folders compared as
// canonical paths; a symbolic link elsewhere to a bundled model is not one).
bool is_bundled_model(const std::string& path);
// Where `specchat-cli calibrate` writes without --out: beside the drafter
// (calibration_path), unless the drafter is a bundled model or its folder is not writable; then
// user_calibration_path, creating its folder. Throws std::runtime_error, naming the reason and
// --out, when that is needed but there is no cache folder or it cannot be made: a bundled
// drafter's calibration is never written.
std::string calibration_write_path(const std::string& target_path, const std::string& drafter_path);
// Stores timings measured now (the table dated now, beside the cache's tables of other setups)
// into timing_cache_path(target_path, draft_path), creating its folders; a cache file made for other model
// files is replaced. Returns the path written. Throws std::runtime_error when there is no cache
// directory or the write fails.
std::string cache_calibration_timings(const std::string& target_path, const std::string& draft_path,
                                      const StepTimings& t, const TimingSetup& setup, int context_tokens, int reps,
                                      double disorder = 1.0);

}  // namespace specchat
