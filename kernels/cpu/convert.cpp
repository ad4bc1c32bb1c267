#include "kernels/cpu/convert.h"

#include <stdexcept>
#include <string>

#include <cstring>

#include "kernels/cpu/ops_simd.h"
#include "kernels/random_blocks.h"
#include "kernels/random_hash.h"

namespace specchat::cpu {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  uint32_t bits;
  if (e == 0) {
    // Zero or subnormal: m * 2^-24, exact in f32.
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (e == 31) {  // inf, or a NaN made quiet (as F16C's vcvtph2ps: the same bits)
    bits = sign | 0x7f800000u | (m << 13) | (m != 0 ? 0x400000u : 0u);
  } else {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN (NaN made quiet so it cannot turn into inf)
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  }
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {  // normal f16: rebias the exponent (-112) and round to nearest even
    ax += 0xc8000fffu + ((ax >> 13) & 1u);
    return static_cast<uint16_t>(sign | (ax >> 13));
  }
  // Subnormal f16 (multiples of 2^-24): adding 0.5 puts the value where an f32 ulp is 2^-24, so
  // the FPU's own round-to-nearest-even does the rounding; the low bits are the f16 mantissa.
  float af;
  std::memcpy(&af, &ax, 4);
  const float t = af + 0.5f;
  uint32_t tb;
  std::memcpy(&tb, &t, 4);
  return static_cast<uint16_t>(sign | (tb - 0x3f000000u));
}

float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

namespace {
void require_element_type(DType t, const char* fn) {
  if (dtype_is_block(t)) {
    throw std::invalid_argument(std::string(fn) + ": " + dtype_name(t) + " is a block type (element types only)");
  }
}
}  // namespace

void convert_from_f32(const float* src, void* dst, DType dtype, int64_t n) {
  require_element_type(dtype, "convert_from_f32");
  if (dtype == DType::f32) {
    if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  auto* d = static_cast<uint16_t*>(dst);
  if (dtype == DType::f16) {  // F16C where present: the same bits (kernels/cpu/ops_simd.h)
    if (simd::avx2_available()) {
      simd::f32_to_f16_avx2(src, d, n);
    } else {
      simd::f32_to_f16_generic(src, d, n);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
}

void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n) {
  require_element_type(dtype, "convert_to_f32");
  if (dtype == DType::f32) {
    if (n > 0) std::memmove(dst, src, static_cast<size_t>(n) * 4);
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  if (dtype == DType::f16) {
    if (simd::avx2_available()) {
      simd::f16_to_f32_avx2(s, dst, n);
    } else {
      simd::f16_to_f32_generic(s, dst, n);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}

float random_value(uint64_t seed, int64_t i, float a) {
  return detail::random_value_f32(seed, static_cast<uint64_t>(i), a);
}

void random_fill(void* dst, DType dtype, int64_t n, uint64_t seed, float a) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = random_value(seed, i, a);
    switch (dtype) {
      case DType::f32: static_cast<float*>(dst)[i] = v; break;
      case DType::f16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case DType::bf16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
      default: throw std::invalid_argument(std::string("random_fill: ") + dtype_name(dtype) + " is not an element type");
    }
  }
}

void random_fill_blocks(void* dst, DType t, int64_t n, uint64_t seed, float a) {
  if (!dtype_is_block(t) || n < 0 || n % dtype_block_size(t) != 0) {
    throw std::invalid_argument(std::string("random_fill_blocks: ") + std::to_string(n) + " values of " + dtype_name(t) +
                                " (block types, whole blocks only)");
  }
  uint16_t d = 0, dmin = 0;
  detail::random_block_scales(t, a, &d, &dmin);
  auto* out = static_cast<uint8_t*>(dst);
  const uint64_t bytes = dtype_row_bytes(t, static_cast<uint64_t>(n));
  for (uint64_t i = 0; i < bytes; ++i) out[i] = detail::random_block_byte(t, seed, i, d, dmin);
}

}  // namespace specchat::cpu
