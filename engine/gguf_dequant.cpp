// Dequantization of GGUF tensor data to f32 (gguf.h dequantize_to_f32): f32, f16 and bf16 by
// the kernels' exact converters, the block-quantized types through their scalar references.
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/gguf.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/quant.h"

namespace specchat {

void dequantize_to_f32(GgmlType type, const uint8_t* src, float* dst, uint64_t n) {
  switch (type) {
    case GgmlType::f32:
      if (n) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::f16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = cpu::f16_to_f32(h);
      }
      return;
    case GgmlType::bf16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = cpu::bf16_to_f32(h);
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
