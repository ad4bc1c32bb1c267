// Catch2 v2 entry point shared by the non-GUI test programs; each process gets its own timing
// cache (test_cache_dir.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test_cache_dir.h"

int main(int argc, char** argv) {
  specchat::test::use_private_cache_dir();
  return Catch::Session().run(argc, argv);
}
