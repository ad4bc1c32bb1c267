// Shared loading of the bundled models for [model] tests (loaded once per test program).
#pragma once

#include <filesystem>
#include <memory>

#include "engine/model_pair.h"
#include "test_paths.h"

namespace specchat::test {

inline bool bundled_models_present() {
  return std::filesystem::exists(target_model()) && std::filesystem::exists(draft_model());
}

// The bundled pair with its tokenizer, loaded on first use. Tests must leave the caches in any
// state: Generator reuses only the prefix it verifies.
inline ModelPair& bundled_pair() {
  static ModelPair pair = [] {
    PairOptions o;
    o.target_path = target_model();
    o.draft_path = draft_model();
    return ModelPair::load(o);
  }();
  return pair;
}

}  // namespace specchat::test
