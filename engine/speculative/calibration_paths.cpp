// Where calibrations and timing tables live on disk (engine/speculative/calibration_store.h):
// the user's cache folder, the timing cache's and the user's own calibration's names, and
// which calibration file a plan reads and calibrate writes for a drafter.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "engine/model_pair.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"

namespace specchat {

namespace fs = std::filesystem;

std::string timing_cache_dir() {
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  // Relative paths are ignored (the XDG rule), so the cache does not move with the working folder.
  const std::string own = env("SPECCHAT_CACHE_DIR");
  if (!own.empty() && own.front() == '/') return own;
  const std::string xdg = env("XDG_CACHE_HOME");
  if (!xdg.empty() && xdg.front() == '/') return xdg + "/specchat";
  const std::string home = env("HOME");
  if (!home.empty() && home.front() == '/') return home + "/.cache/specchat";
  return "";
}

namespace {

// <timing_cache_dir()>/<folder>/<drafter file name without .gguf>-<drafter's fingerprint>-<target's
// fingerprint><suffix>; "" when there is no cache folder or a model file cannot be read.
std::string pair_cache_file(const std::string& target_path, const std::string& drafter_path, const char* folder,
                            const char* suffix) {
  const std::string dir = timing_cache_dir();
  if (dir.empty()) return "";
  try {
    std::string stem = fs::path(drafter_path).filename().string();
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".gguf") == 0) stem.resize(stem.size() - 5);
    const std::string name = stem + "-" + file_fingerprint(drafter_path) + "-" + file_fingerprint(target_path) + suffix;
    return (fs::path(dir) / folder / name).string();
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace

std::string timing_cache_path(const std::string& target_path, const std::string& draft_path) {
  // "-t4": every node count up to 8 (calibration_verify_nodes) on a 256-token context, in rounds
  // over all sizes, a disturbed table marked (measure_step_timings). Caches of earlier methods
  // are not read: t3 (a 64-token context: the chains of 3 and 4 a few hundredths of a
  // millisecond apart), t2 (2 and 4 nodes timed, 3 interpolated: --tree auto chose a chain of 4
  // over the faster 3) and the first (each size in turn, the first one cold: a one-row forward
  // measured 1.4x its true time, and --tree auto chose chains too short).
  return pair_cache_file(target_path, draft_path, "timings", "-t4.json");
}

std::string user_calibration_path(const std::string& target_path, const std::string& drafter_path) {
  return pair_cache_file(target_path, drafter_path, "calibrations", ".calibration.json");
}

namespace {

// Whether calibrate writes the drafter's calibration beside it (calibration_write_path).
bool writes_beside(const std::string& drafter_path) {
  const std::string beside = calibration_path(drafter_path);
  const fs::path folder = fs::path(beside).has_parent_path() ? fs::path(beside).parent_path() : fs::path(".");
  return !is_bundled_model(drafter_path) && ::access(folder.c_str(), W_OK) == 0;
}

}  // namespace

std::string calibration_read_path(const std::string& target_path, const std::string& drafter_path) {
  // Read where calibrate writes: a drafter of the user's own in a writable folder keeps its
  // calibration beside it, even when a copy of the same files (the bundled ones) has one in
  // the cache (regression: the older cache file won over the one just written beside it).
  if (writes_beside(drafter_path)) return calibration_path(drafter_path);
  const std::string own = user_calibration_path(target_path, drafter_path);
  std::error_code ec;
  if (!own.empty() && fs::exists(fs::symlink_status(own, ec))) return own;
  return calibration_path(drafter_path);
}

bool is_bundled_model(const std::string& path) {
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(fs::absolute(bundled_models_dir(), ec), ec);
  if (ec) return false;
  // The folder the name is in, not where a link points: a link to a bundled model in a folder of
  // the user's is theirs (its calibration goes beside it there).
  const fs::path parent = fs::weakly_canonical(fs::absolute(path, ec).parent_path(), ec);
  return !ec && parent == dir;
}

std::string calibration_write_path(const std::string& target_path, const std::string& drafter_path) {
  const std::string beside = calibration_path(drafter_path);
  const fs::path folder = fs::path(beside).has_parent_path() ? fs::path(beside).parent_path() : fs::path(".");
  if (writes_beside(drafter_path)) return beside;
  const bool bundled = is_bundled_model(drafter_path);
  const std::string why = bundled ? "the drafter is one of the bundled models, whose calibration ships with them"
                                  : "the drafter's folder " + folder.string() + " is not writable";
  const std::string own = user_calibration_path(target_path, drafter_path);
  // Never beside a bundled drafter (regression: with no cache folder the tracked file was rewritten).
  if (own.empty()) {
    throw std::runtime_error("nowhere to write the calibration: " + why +
                             ", and there is no cache folder (set SPECCHAT_CACHE_DIR, XDG_CACHE_HOME or HOME to an "
                             "absolute path), or give --out FILE");
  }
  const fs::path dir = fs::path(own).parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error("nowhere to write the calibration: " + why + ", and the cache folder " + dir.string() +
                             " cannot be made (is a part of its path a file?); set SPECCHAT_CACHE_DIR to a folder, or "
                             "give --out FILE");
  }
  return own;
}

}  // namespace specchat
