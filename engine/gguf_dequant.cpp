// Dequantization of GGUF tensor data to f32 (gguf.h dequantize_to_f32): f32, f16 and bf16 by
// their bit layouts, the block-quantized types through the kernels' scalar references.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/gguf.h"
#include "kernels/cpu/quant.h"

namespace specchat {

namespace {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    const float f = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -f : f;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or nan keeping the payload
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

void dequantize_to_f32(GgmlType type, const uint8_t* src, float* dst, uint64_t n) {
  switch (type) {
    case GgmlType::f32:
      if (n) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::f16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      return;
    case GgmlType::bf16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      return;
    case GgmlType::q8_0: case GgmlType::q4_0: case GgmlType::q4_k: case GgmlType::q5_k: case GgmlType::q6_k:
      if (n % static_cast<uint64_t>(dtype_block_size(type)) != 0) {
        throw GgufError(GgufErrorKind::absurd_value, std::string("dequantize_to_f32: ") + dtype_name(type) +
                                                         " needs a multiple of " +
                                                         std::to_string(dtype_block_size(type)) + " elements, got " +
                                                         std::to_string(n));
      }
      cpu::dequantize_row_ref(type, src, dst, static_cast<int64_t>(n));
      return;
    default:
      break;
  }
  throw GgufError(GgufErrorKind::unknown_type,
                  std::string("dequantize_to_f32: unsupported type ") + dtype_name(type));
}

}  // namespace specchat
