// Element types of weight tensors shared by the CPU and CUDA kernels. Activations, the KV cache
// and logits are always f32; only weights (and the matmul's converted input) use f16/bf16.
#pragma once

#include <cstddef>
#include <cstdint>

namespace specchat {

// f32: IEEE binary32. f16: IEEE binary16. bf16: the upper 16 bits of a binary32 (brain float).
enum class DType : uint8_t { f32, f16, bf16 };

// Bytes per element.
constexpr size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

// "f32", "f16", "bf16".
constexpr const char* dtype_name(DType t) {
  return t == DType::f32 ? "f32" : (t == DType::f16 ? "f16" : "bf16");
}

}  // namespace specchat
