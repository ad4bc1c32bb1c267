// Random block-type (quantized) weights for benchmark models made without a file: the byte rule
// shared verbatim by cpu::random_fill_blocks and cuda::random_fill_blocks (bit-identical twins).
// Every byte is random except each block's f16 scale fields, which get a fixed scale chosen so
// the dequantized values stay within a few times the amplitude a (layouts: kernels/cpu/quant.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"
#include "kernels/random_hash.h"

namespace specchat::detail {

// Binary16 bits of a positive f32 by truncation (no rounding; subnormal results included), 0
// below 2^-24 and the largest finite value above the range: plain bit arithmetic, the same on
// the host and the device.
SPECCHAT_HOST_DEVICE inline uint16_t f16_bits_trunc(float f) {
  uint32_t u = 0;
#ifdef __CUDA_ARCH__
  u = __float_as_uint(f);
#else
  std::memcpy(&u, &f, sizeof u);
#endif
  const int e = static_cast<int>((u >> 23) & 0xFFu) - 127 + 15;
  if (!(f > 0.0f) || e < -10) return 0;
  if (e <= 0) return static_cast<uint16_t>(((u & 0x7FFFFFu) | 0x800000u) >> (14 - e));  // subnormal
  if (e >= 31) return 0x7BFF;
  return static_cast<uint16_t>((static_cast<uint32_t>(e) << 10) | ((u >> 13) & 0x3FFu));
}

// The f16 scale d (and, for q4_K/q5_K, the min scale dmin) of every block of type t for values
// of amplitude a: the largest |quant| times its sub-block scale factor, times d, is about 2a.
SPECCHAT_HOST_DEVICE inline void random_block_scales(DType t, float a, uint16_t* d, uint16_t* dmin) {
  float dv = a, mv = 0.0f;
  switch (t) {
    case DType::q8_0: dv = 2.0f * a / 127.0f; break;
    case DType::q4_0: dv = 2.0f * a / 8.0f; break;
    case DType::q4_k: dv = 2.0f * a / (63.0f * 15.0f); mv = a / 63.0f; break;
    case DType::q5_k: dv = 2.0f * a / (63.0f * 31.0f); mv = a / 63.0f; break;
    default: dv = 2.0f * a / (127.0f * 32.0f); break;  // q6_k
  }
  *d = f16_bits_trunc(dv);
  *dmin = f16_bits_trunc(mv);
}

// Byte i (counted from the tensor's start) of a random tensor of block type t: the scale fields
// d (and dmin) from random_block_scales, every other byte the low 8 bits of random_bits(seed, i).
SPECCHAT_HOST_DEVICE inline uint8_t random_block_byte(DType t, uint64_t seed, uint64_t i, uint16_t d, uint16_t dmin) {
  const uint64_t bb = dtype_block_bytes(t);
  const uint64_t p = i % bb;
  const uint64_t d_at = t == DType::q6_k ? 208 : 0;
  if (p == d_at) return static_cast<uint8_t>(d & 0xFF);
  if (p == d_at + 1) return static_cast<uint8_t>(d >> 8);
  if (t == DType::q4_k || t == DType::q5_k) {
    if (p == 2) return static_cast<uint8_t>(dmin & 0xFF);
    if (p == 3) return static_cast<uint8_t>(dmin >> 8);
  }
  return static_cast<uint8_t>(random_bits(seed, i) & 0xFF);
}

}  // namespace specchat::detail
