// AVX2 copies of the small element-wise ops of one forward (kernels/cpu/ops.h, convert.h) and
// their generic twins. Each copy performs the same IEEE operations in the same order as its twin
// (this file is compiled with -ffp-contract=off, so no product is fused into an add), so the two
// give the same bits, and a row's result never depends on the other rows of the batch.
//
// Why: in an 8-row verification forward of the bundled target these ops ran one element at a
// time on the calling thread, 11.7 µs of every layer's ~100 µs (bench --profile, 2026-12-05:
// K/V writes 3.5 µs, two RMSNorms 2.8, residual adds 1.7, RoPE 1.3), while the second core
// waited for the next product.
//
// The public entry points (cpu::rmsnorm, add_inplace, rope_with_table, convert_from_f32 /
// convert_to_f32 for f16) pick the AVX2 copy when the CPU has AVX2 + FMA + F16C
// (cpu_has_avx2_fma_f16c) and the twin otherwise; the functions here are for the tests that hold
// one to the other.
#pragma once

#include <cstdint>

#include "kernels/cpu/ops.h"

namespace specchat::cpu::simd {

// True when the AVX2 copies below may run (x86-64 with AVX2, FMA and F16C).
bool avx2_available();

// Generic twins (any CPU; what the public functions ran before the AVX2 copies).
// rmsnorm: x, out [n_tokens, d], weight [d]; 16 partial sums of squares in double (lane j takes
// columns ≡ j mod 16), added pairwise (lane j += lane j + w for w = 8, 4, 2, 1), then
// out = x · scale · weight left to right.
void rmsnorm_generic(const float* x, const float* weight, float* out, int n_tokens, int d, float eps);
// x[n] += y[n].
void add_inplace_generic(float* x, const float* y, int64_t n);
// RoPE with a table (cpu::rope_with_table with RopeParams): x [n_tokens, n_head, head_dim].
void rope_generic(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
                  const float* cos_tab, const float* sin_tab);
// dst[n] = binary16 bits of src[n], round to nearest even (cpu::f32_to_f16 per element).
void f32_to_f16_generic(const float* src, uint16_t* dst, int64_t n);
// dst[n] = src[n] (binary16 bits) widened exactly (cpu::f16_to_f32 per element).
void f16_to_f32_generic(const uint16_t* src, float* dst, int64_t n);

// The AVX2 copies: same contracts, same bits. Call only when avx2_available().
void rmsnorm_avx2(const float* x, const float* weight, float* out, int n_tokens, int d, float eps);
void add_inplace_avx2(float* x, const float* y, int64_t n);
void rope_avx2(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
               const float* cos_tab, const float* sin_tab);
// F16C's vcvtps2ph with round-to-nearest-even: the same bits as f32_to_f16, NaN included (both
// keep the sign and the top 10 payload bits and set the quiet bit).
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n);

}  // namespace specchat::cpu::simd
