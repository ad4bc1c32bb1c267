// Internal to kernels/cpu: what the integer path's x86 files (linear_q8_x86.cpp: Form::b32;
// linear_q8k_x86.cpp: Form::k256) share: small SIMD helpers and the k256 entry points.
#pragma once
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/linear_q8.h"
#include "kernels/cpu/linear_tiling.h"
#include "kernels/cpu/quant.h"

#define SPECCHAT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace specchat::cpu::q8 {

// Scales and mins of a q4_K/q5_K block as bytes: [0..8) the 8 sub-block scales, [8..16) the mins
// (scale_min_k4's bit layout, four sub-blocks per 32-bit word).
inline void k4_scale_bytes(const uint8_t* scales, uint8_t out[16]) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, scales, 4);
  std::memcpy(&w1, scales + 4, 4);
  std::memcpy(&w2, scales + 8, 4);
  const uint32_t o[4] = {w0 & 0x3F3F3F3Fu, (w2 & 0x0F0F0F0Fu) | (((w0 >> 6) & 0x03030303u) << 4), w1 & 0x3F3F3F3Fu,
                         ((w2 >> 4) & 0x0F0F0F0Fu) | (((w1 >> 6) & 0x03030303u) << 4)};
  std::memcpy(out, o, 16);
}

// k4_scale_bytes in SSE registers, from a 16-byte load at `scales` (the 4 bytes after the 12
// are read and dropped; every q4_K/q5_K block has them): no scalar stores for the vector loads
// to wait on.
SPECCHAT_AVX2 inline __m128i k4_scale_bytes_v(const uint8_t* scales) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(scales));
  // P: bytes 0-3, 8-11, 4-7, 8-11 of the scales; Q: bytes 0-3 and 4-7 in the 2nd and 4th words.
  const __m128i P = _mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i Q = _mm_shuffle_epi8(v, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
  const __m128i lo6 = _mm_and_si128(P, _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0));
  const __m128i hi4 = _mm_and_si128(_mm_srli_epi16(P, 4), _mm_setr_epi32(0, 0, 0, 0x0F0F0F0F));
  const __m128i top2 = _mm_and_si128(_mm_srli_epi16(Q, 2), _mm_set1_epi8(0x30));
  return _mm_or_si128(_mm_or_si128(lo6, hi4), top2);
}

// Software prefetch of the weight bytes kPrefetch ahead of [p, p + n): with the integer work per
// byte, a core issues its loads too slowly for the hardware prefetchers to keep DRAM busy
// (measured: 2048 x 131072, two threads, q8_0 34 -> 67 GB/s, q4_K 16 -> 33, q6_K 19 -> 61).
constexpr size_t kPrefetch = 16384;
inline void prefetch_block(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + o), _MM_HINT_T0);
}

// ---------------------------------------------------------------------------------------------
// AVX2

SPECCHAT_AVX2 inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// 8 lanes of Σ of 4 products u8 × s8 (exact while each pair of products fits in 16 bits).
SPECCHAT_AVX2 inline __m256i dot4(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

SPECCHAT_AVX2 inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// 8 floats: max_ps / min_ps clamp to ±127, round half to even (MXCSR default), 32-bit integers.
SPECCHAT_AVX2 inline __m256i round8(__m256 v, __m256 id) {
  v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, id), _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvtps_epi32(v);
}

SPECCHAT_VNNI inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }

// Rows j0 .. j0 + nr − 1 of y for every row of a (form_for(t): k256 or k256n) from the q4_K,
// q5_K or q6_K weight rows wr[0 .. 4) (a short block repeats its last row): linear_q8.h's
// arithmetic for that form.
void rows_k256_avx2(const Act& a, const uint8_t* const wr[], DType t, float* y, int n_out, int j0, int nr);
void rows_k256_avx512(const Act& a, const uint8_t* const wr[], DType t, float* y, int n_out, int j0, int nr);

}  // namespace specchat::cpu::q8

#endif  // __x86_64__
