// ggml's quantized weight blocks (q8_0, q4_0, q4_K, q5_K, q6_K): their byte layouts, the
// scalar reference dequantization (the twin every SIMD dequantizer is held to) and the
// quantizers behind specchat-quantize.
//
// Layouts: ggml-common.h / the GGUF specification (docs/gguf.md, "ggml types"); values are
// little endian, scales are IEEE binary16. A row of n values is n / block_size consecutive
// blocks; the file's tensor bytes are mapped in place and read through these structs.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cpu {

// q8_0: 32 values = d · q, q signed 8-bit.
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // quants
};
// q4_0: 32 values = d · (q − 8), q 4-bit; byte i holds value i (low nibble) and i + 16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
// q4_K: 256 values in 8 sub-blocks of 32: value = d · sc[s] · q − dmin · m[s], q 4-bit, sc and m
// 6-bit (packed in `scales`, see scale_min_k4). Sub-blocks 2g and 2g + 1 (g = 0..3) share the
// 32 bytes qs[32g ..]: low nibbles for sub-block 2g, high nibbles for 2g + 1.
struct BlockQ4K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
// q5_K: as q4_K with a fifth bit per value: for sub-block s, bit s of qh[l] is the high bit of
// value l of that sub-block (l = 0..31).
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
// q6_K: 256 values in 16 sub-blocks of 16: value = d · scales[s] · (q − 32), q 6-bit. For half
// h (values 128h ..) and l = 0..31: ql[64h + l] holds the low nibbles of values 128h + l (low)
// and 128h + 64 + l (high), ql[64h + 32 + l] those of 128h + 32 + l and 128h + 96 + l, and
// qh[32h + l] their high 2 bits (bits 0-1, 2-3, 4-5, 6-7 for + 0, + 32, + 64, + 96).
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == dtype_block_bytes(DType::q8_0));
static_assert(sizeof(BlockQ4_0) == dtype_block_bytes(DType::q4_0));
static_assert(sizeof(BlockQ4K) == dtype_block_bytes(DType::q4_k));
static_assert(sizeof(BlockQ5K) == dtype_block_bytes(DType::q5_k));
static_assert(sizeof(BlockQ6K) == dtype_block_bytes(DType::q6_k));

// The 6-bit scale and min of sub-block s (0..7) of a q4_K/q5_K block: sub-blocks 0-3 in the low
// 6 bits of scales[s] and scales[s + 4]; 4-7 in the nibbles of scales[s + 4] with their top
// 2 bits in the top bits of scales[s − 4] and scales[s].
inline void scale_min_k4(int s, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[s + 4] & 0xF) | ((scales[s - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[s + 4] >> 4) | ((scales[s] >> 6) << 4));
  }
}

// dst[n] (f32) = the n values at `src` in type t (n a multiple of the block size for block types;
// std::invalid_argument otherwise). Element types are widened exactly. Block types: the scale
// products are rounded to f32 as ggml does (d · sc, dmin · m), then value = fma(d·sc, q, −dmin·m)
// (one rounding), which the SIMD dequantizers reproduce bit for bit.
void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n);

// dst = the n values of src quantized to block type t (n a multiple of the block size; an element
// type or a bad n throws std::invalid_argument). q8_0: d = max|x| / 127, q = round(x / d).
// q4_0: d = −x_m / 8 for the value x_m of largest magnitude. k-quants: per sub-block a scale
// (and for q4_K/q5_K a min) fitted by a few least-squares passes, then the sub-block scales
// quantized to 6 bits (q4_K/q5_K) or 8 bits (q6_K) against the super-block's f16 d (and dmin).
// Non-finite input throws std::invalid_argument.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace specchat::cpu
