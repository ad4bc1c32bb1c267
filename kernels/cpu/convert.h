// f16 / bf16 <-> f32 conversion and the deterministic random fill; CPU twins of
// kernels/cuda/convert.h (bit-identical results).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cpu {

// IEEE binary16 bits -> f32 (exact for numbers, subnormals and inf; a NaN keeps its sign and payload
// and is made quiet, as F16C does).
float f16_to_f32(uint16_t h);
// f32 -> binary16 bits, round to nearest even; overflow -> inf, NaN stays NaN (quiet).
uint16_t f32_to_f16(float f);
// bf16 bits -> f32 (exact: the bits are the upper half of the f32).
float bf16_to_f32(uint16_t h);
// f32 -> bf16 bits, round to nearest even; NaN stays NaN (quiet).
uint16_t f32_to_bf16(float f);

// dst[n] (dtype) = src[n] (f32), rounded to nearest even. Element types only (f32/f16/bf16):
// a block type throws std::invalid_argument (also convert_to_f32).
void convert_from_f32(const float* src, void* dst, DType dtype, int64_t n);
// dst[n] (f32) = src[n] (dtype), exact.
void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n);

// The f32 value random_fill writes at index i before rounding to dtype: a * (2u - 1) with
// u = (splitmix64(seed * 0x9E3779B97F4A7C15 + i) >> 40) / 2^24, uniform on [-a, a).
float random_value(uint64_t seed, int64_t i, float a);
// dst[i] = random_value(seed, i, a) rounded to dtype, i < n.
void random_fill(void* dst, DType dtype, int64_t n, uint64_t seed, float a);
// n values (whole blocks) of block type t (q8_0, q4_0, q4_K, q5_K, q6_K) at dst: random bytes
// except each block's f16 scales, set so the values lie within a few times a
// (kernels/random_blocks.h; for benchmark models without a file, not for quality). Writes
// dtype_row_bytes(t, n) bytes. std::invalid_argument for an element type or partial blocks.
void random_fill_blocks(void* dst, DType t, int64_t n, uint64_t seed, float a);

}  // namespace specchat::cpu
