// Helpers shared by the model sections of specchat-gpu-bench.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/model.h"

namespace specchat::bench {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A fixed prompt of token ids (no tokenizer): BOS, then ids spread over the vocabulary.
inline std::vector<int32_t> prompt_ids(int n, int n_vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i == 0 ? 1 : 3 + (i * 7919 + 17) % (n_vocab - 3);
  return ids;
}

// A binary tree of n draft nodes hanging off the committed prefix [0, base): node i's parent is
// (i − 1) / 2 (node 0 is a child of the prefix), position base + depth, all logits returned.
inline Batch tree_batch(int n, int base, int n_vocab) {
  Batch b;
  b.kv_pos0 = base;
  std::vector<int> depth(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const int p = i == 0 ? -1 : (i - 1) / 2;
    if (p >= 0) depth[static_cast<size_t>(i)] = depth[static_cast<size_t>(p)] + 1;
    b.tokens.push_back(3 + (i * 104729 + 7) % (n_vocab - 3));
    b.parent.push_back(p);
    b.pos.push_back(base + depth[static_cast<size_t>(i)]);
    b.out_rows.push_back(i);
  }
  return b;
}

}  // namespace specchat::bench
