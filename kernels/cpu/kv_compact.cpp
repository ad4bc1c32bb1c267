#include "kernels/cpu/kv_compact.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace specchat::cpu {

void check_kv_path(const int32_t* path, int n_path, int dst0) {
  if (dst0 < 0 || n_path < 0) throw std::invalid_argument("kv path: negative dst0 or length");
  for (int j = 0; j < n_path; ++j) {
    if (path[j] < dst0 + j || (j > 0 && path[j] <= path[j - 1])) {
      throw std::invalid_argument("kv path: slot " + std::to_string(path[j]) + " at position " +
                                  std::to_string(j) +
                                  " is not increasing or lies below its destination");
    }
  }
}

void kv_compact(float* cache, int n_layer, int64_t layer_stride, int64_t row_stride,
                int row_floats, const int32_t* path, int n_path, int dst0) {
  check_kv_path(path, n_path, dst0);
  const size_t bytes = static_cast<size_t>(row_floats) * sizeof(float);
  for (int il = 0; il < n_layer; ++il) {
    float* base = cache + il * layer_stride;
    for (int j = 0; j < n_path; ++j) {
      if (path[j] == dst0 + j) continue;
      // Distinct rows of one buffer: path[j] > dst0 + j, and rows do not overlap when
      // row_stride >= row_floats.
      std::memcpy(base + (dst0 + j) * row_stride, base + path[j] * row_stride, bytes);
    }
  }
}

}  // namespace specchat::cpu
