// Test helpers shared by the block-weight kernel tests (test_quant.cpp, test_linear_q8.cpp):
// random blocks, uniform vectors, quantized weight matrices.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"

namespace specchat::test {

inline constexpr DType kBlockTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k};

// n_blocks blocks of type t with random bytes everywhere except the f16 scales, which get a
// random positive magnitude in [1e-3, 2e-2) (random bits would make inf/NaN scales).
inline std::vector<uint8_t> random_blocks(DType t, int n_blocks, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  const size_t bb = dtype_block_bytes(t);
  std::vector<uint8_t> v(bb * static_cast<size_t>(n_blocks));
  for (uint8_t& b : v) b = static_cast<uint8_t>(byte(g));
  for (int i = 0; i < n_blocks; ++i) {
    uint8_t* blk = v.data() + bb * static_cast<size_t>(i);
    const uint16_t d = cpu::f32_to_f16(scale(g)), dmin = cpu::f32_to_f16(scale(g));
    if (t == DType::q6_k) {
      std::memcpy(blk + 208, &d, 2);
    } else {
      std::memcpy(blk, &d, 2);
      if (t == DType::q4_k || t == DType::q5_k) std::memcpy(blk + 2, &dmin, 2);
    }
  }
  return v;
}

inline std::vector<float> uniform(size_t n, float a, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<float> v(n);
  for (float& x : v) x = u(g);
  return v;
}

// W [n_out, n_in] uniform in ±1/sqrt(n_in), quantized to t.
inline std::vector<uint8_t> quantized_weights(DType t, int n_out, int n_in, uint32_t seed) {
  const std::vector<float> w = uniform(static_cast<size_t>(n_out) * n_in, 1.0f / std::sqrt(static_cast<float>(n_in)), seed);
  std::vector<uint8_t> q(dtype_row_bytes(t, static_cast<uint64_t>(n_in)) * static_cast<size_t>(n_out));
  cpu::quantize_row(t, w.data(), q.data(), static_cast<int64_t>(w.size()));
  return q;
}

}  // namespace specchat::test
