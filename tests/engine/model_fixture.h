// Shared loading of the bundled models for [model] tests (loaded once per test program).
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <memory>

#include "engine/model_pair.h"
#include "test_paths.h"

namespace specchat::test {

// Largest |a[i] − b[i]| over b's elements (a has at least as many).
inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

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
