// Where the CLI finds the data it ships with (prompt suites and held-out prompts), in an
// installed tree as well as in the source tree it was built from.
#pragma once

#include <string>

namespace specchat::cli {

// The bundled data file `name` (heldout_prompts.json, qualitative.json or throughput.json):
// <exe dir>/../share/specchat/bench/<name> for an installed CLI (the .deb's layout), else the
// source tree's resources/bench/<name> or tests/data/<name> (the path compiled in, then relative
// to the working directory). Throws std::runtime_error listing the places tried.
std::string bundled_data_file(const std::string& name);

}  // namespace specchat::cli
