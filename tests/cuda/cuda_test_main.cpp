// Catch2 runner for the [cuda] tests. Without a usable device it prints why and returns 77,
// which CTest reports as skipped (SKIP_RETURN_CODE 77). Listing (catch_discover_tests runs
// --list-test-names-only at build time) and --help never touch the device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "kernels/cuda/check.h"

int main(int argc, char* argv[]) {
  Catch::Session session;
  const int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) return rc;
  const Catch::ConfigData& cfg = session.configData();
  const bool listing = cfg.listTests || cfg.listTestNamesOnly || cfg.listTags || cfg.listReporters ||
                       cfg.showHelp;
  if (!listing) {
    std::string why;
    if (!specchat::cuda::device_available(&why)) {
      std::printf("test_cuda: skipped, no usable CUDA device (%s)\n", why.c_str());
      return 77;
    }
  }
  return session.run();
}
