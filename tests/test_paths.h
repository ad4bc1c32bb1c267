// Paths the tests use: the source tree, the bundled models and tests/data (in-repo test and
// conformance data, see tests/data/README.md). Nothing outside the repository is read.
#pragma once
#include <cstdlib>
#include <string>

namespace specchat::test {
inline std::string source_dir() { return SPECCHAT_SOURCE_DIR; }
inline std::string models_dir() { return SPECCHAT_MODELS_DIR; }
inline std::string target_model() { return models_dir() + "/specchat-target.gguf"; }
inline std::string draft_model() { return models_dir() + "/specchat-draft.gguf"; }
inline std::string test_data(const std::string& name) { return source_dir() + "/tests/data/" + name; }
inline std::string cli_path() { return SPECCHAT_CLI_PATH; }
inline std::string quantize_path() { return SPECCHAT_QUANTIZE_PATH; }
}  // namespace specchat::test
