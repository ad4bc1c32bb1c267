// The hash behind random_fill, shared verbatim by the CPU twin and the CUDA kernel so both
// produce the same bits (compiled as __host__ __device__ under nvcc).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define SPECCHAT_HOST_DEVICE __host__ __device__
#else
#define SPECCHAT_HOST_DEVICE
#endif

namespace specchat::detail {

// splitmix64 (Steele, Lea, Flood 2014) of seed * golden + i: a counter-based generator, so any
// element can be computed independently (one thread each on the device).
SPECCHAT_HOST_DEVICE inline uint64_t random_bits(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// a * (2u - 1), u = top 24 bits / 2^24. 2u - 1 = (2m - 2^24) / 2^24 is exact in f32 (|k| <= 2^24),
// so the only rounding is the final multiply: one IEEE operation, the same on CPU and GPU.
SPECCHAT_HOST_DEVICE inline float random_value_f32(uint64_t seed, uint64_t i, float a) {
  const int32_t m = static_cast<int32_t>(random_bits(seed, i) >> 40);
  const int32_t k = 2 * m - (1 << 24);
  const float t = static_cast<float>(k) * (1.0f / 16777216.0f);
  return t * a;
}

}  // namespace specchat::detail
