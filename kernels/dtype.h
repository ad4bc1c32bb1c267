// The one weight-type vocabulary of the engine: what a tensor's bytes are, for the GGUF reader,
// the CPU and CUDA kernels and memory accounting (replaces the separate GgmlType of the reader).
// Element types (f32, f16, bf16) store one value per 4 or 2 bytes; block types (ggml's
// quantized formats) store blocks of `dtype_block_size` values in `dtype_block_bytes` bytes.
// Activations, the KV cache and logits are always f32; only weights use the other types.
// Layouts of the block types: ggml's (ggml-common.h / the GGUF spec), so files map in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace specchat {

// f32: IEEE binary32. f16: IEEE binary16. bf16: the upper 16 bits of a binary32 (brain float).
// q8_0: blocks of 32: f16 scale + 32 int8. q4_0: blocks of 32: f16 scale + 16 bytes of nibbles.
// q4_k, q5_k, q6_k: super-blocks of 256 (ggml "k-quants": 144, 176 and 210 bytes).
enum class DType : uint8_t { f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k };

// Values per block: 1 for element types, 32 for q8_0/q4_0, 256 for the k-quants.
constexpr int dtype_block_size(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: return 1;
    case DType::q8_0: case DType::q4_0: return 32;
    case DType::q4_k: case DType::q5_k: case DType::q6_k: return 256;
  }
  return 1;
}

// Bytes per block (for element types: bytes per element).
constexpr size_t dtype_block_bytes(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::q8_0: return 34;
    case DType::q4_0: return 18;
    case DType::q4_k: return 144;
    case DType::q5_k: return 176;
    case DType::q6_k: return 210;
  }
  return 0;
}

// True for the quantized block types.
constexpr bool dtype_is_block(DType t) { return dtype_block_size(t) > 1; }

// Bytes of n values (n a multiple of the block size for block types).
constexpr uint64_t dtype_row_bytes(DType t, uint64_t n) {
  return n / static_cast<uint64_t>(dtype_block_size(t)) * dtype_block_bytes(t);
}

// Bytes per element of an ELEMENT type (f32: 4, f16/bf16: 2). Kernels that take a DType read
// element types only and refuse block types; use dtype_row_bytes for those.
constexpr size_t dtype_size(DType t) { return dtype_is_block(t) ? 0 : dtype_block_bytes(t); }

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q5_K", "q6_K" (ggml's names).
constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::q8_0: return "q8_0";
    case DType::q4_0: return "q4_0";
    case DType::q4_k: return "q4_K";
    case DType::q5_k: return "q5_K";
    case DType::q6_k: return "q6_K";
  }
  return "?";
}

// ggml's type id (ggml.h enum ggml_type), as stored in GGUF tensor infos.
constexpr uint32_t dtype_ggml_id(DType t) {
  switch (t) {
    case DType::f32: return 0;
    case DType::f16: return 1;
    case DType::q4_0: return 2;
    case DType::q8_0: return 8;
    case DType::q4_k: return 12;
    case DType::q5_k: return 13;
    case DType::q6_k: return 14;
    case DType::bf16: return 30;
  }
  return 0xFFFFFFFFu;
}

// The type of a ggml type id; nullopt for ids this vocabulary does not describe.
constexpr std::optional<DType> dtype_from_ggml(uint32_t id) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    if (dtype_ggml_id(t) == id) return t;
  }
  return std::nullopt;
}

}  // namespace specchat
