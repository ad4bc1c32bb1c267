// The report header's facts about the machine and the models: CPU model and cores, the GPU in
// use, file sha256, the SpecChat commit, the date.
#pragma once

#include <string>

namespace specchat::bench {

// "model name" of /proc/cpuinfo, or "unknown".
std::string cpu_model_name();
// Logical cores (std::thread::hardware_concurrency), ≥ 1.
int cpu_cores();
// SHA-256 of a file as 64 lowercase hex digits: sha256_file_hex (engine/drafters/sha256.h,
// memoised, so a target the drafters' binding hashed is not read again). Throws
// std::runtime_error when the file cannot be read.
std::string file_sha256(const std::string& path);
// `git rev-parse HEAD` of `source_dir` (the build's source tree), with "-dirty" when it has
// uncommitted changes to tracked files; "unknown" when git or the repository is absent.
std::string git_commit(const std::string& source_dir);
// Now, UTC, ISO 8601 ("2026-12-01T05:00:00Z").
std::string utc_now_iso();

}  // namespace specchat::bench
