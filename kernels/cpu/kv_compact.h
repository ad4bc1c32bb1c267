// KV cache path compaction; CPU twin of kernels/cuda/kv_compact.h.
#pragma once

#include <cstdint>

namespace specchat::cpu {

// Throws std::invalid_argument unless path [n_path] is strictly increasing with
// path[j] >= dst0 + j and path[j] >= 0, dst0 >= 0 (what kv_compact relies on). Host check.
void check_kv_path(const int32_t* path, int n_path, int dst0);

// For every layer il < n_layer: row dst0 + j = row path[j] (j ascending), rows at
// cache + il * layer_stride + s * row_stride, row_floats floats each. Same precondition
// (checked here: std::invalid_argument). Copying in ascending j is safe in place: see
// kernels/cuda/kv_compact.h.
void kv_compact(float* cache, int n_layer, int64_t layer_stride, int64_t row_stride,
                int row_floats, const int32_t* path, int n_path, int dst0);

}  // namespace specchat::cpu
