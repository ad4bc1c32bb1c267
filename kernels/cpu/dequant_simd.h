// SIMD dequantizers of the block weight types: the inner step of cpu::linear's fused
// dequantize-and-dot (a tile of weights is dequantized into L1 and consumed there, never
// written back to memory). Internal to kernels/cpu; tests hold them to dequantize_row_ref.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specchat::cpu {

#if defined(__x86_64__)
// The 32 bytes of v as 8-bit integers (unsigned when U, else signed), in 4 vectors of 8 floats
// (exact). Shared by the AVX2 dequantizer and cpu::linear's register paths (linear_blocks.cpp).
template <bool U>
__attribute__((target("avx2,fma,f16c"))) inline void widen32(__m256i v, __m256 out[4]) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; ++i) {
    out[i] = _mm256_cvtepi32_ps(U ? _mm256_cvtepu8_epi32(parts[i]) : _mm256_cvtepi8_epi32(parts[i]));
  }
}
#endif

// AVX2 + FMA + F16C twin of dequantize_row_ref for the block types: dst[n] bit-identical to it
// (the same f32 scale products; fused multiply-subtract where the reference uses std::fma) for
// every scale but a signalling NaN, whose payload F16C quiets.
// n a multiple of the block size. Precondition: the CPU has avx2, fma and f16c (the caller
// dispatches); element types are not handled here (std::invalid_argument).
void dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n);

// True when this CPU runs dequantize_row_avx2.
bool dequant_avx2_supported();

}  // namespace specchat::cpu
