// Every test process gets its own empty timing cache (SPECCHAT_CACHE_DIR, engine/speculative/
// calibration_store.h: where `--tree auto` caches the timings it measures), removed at exit, so
// no test reads what another test or the user's own runs cached, and none writes into the
// user's ~/.cache. The CLI processes a test starts inherit it. A SPECCHAT_CACHE_DIR set by the
// caller is kept.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace specchat::test {

inline void use_private_cache_dir() {
  const char* set = std::getenv("SPECCHAT_CACHE_DIR");
  if (set && *set) return;
  static const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("specchat-test-cache-" + std::to_string(::getpid()));
  ::setenv("SPECCHAT_CACHE_DIR", dir.c_str(), 1);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  });
}

}  // namespace specchat::test
