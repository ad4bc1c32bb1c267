// Reading the in-repo test data (tests/data/, see its README): a file's path that must exist
// (the test fails naming it otherwise: the data is part of the repository, never skipped) and a
// whole file's bytes.
#pragma once
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_paths.h"

namespace specchat::test {

// tests/data/<name>, REQUIREd to exist.
inline std::string require_test_data(const std::string& name) {
  const std::string p = test_data(name);
  INFO("conformance data missing: " << p << " (it is part of the repository: see tests/data/README.md)");
  REQUIRE(std::filesystem::exists(p));
  return p;
}

// The whole file as bytes ("" when it cannot be read).
inline std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace specchat::test
