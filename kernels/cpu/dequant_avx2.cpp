#include "kernels/cpu/dequant_simd.h"

#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specchat::cpu {

#if defined(__x86_64__)

namespace {

#define SPECCHAT_DQ __attribute__((target("avx2,fma,f16c")))

// y[0..31] = s · q with s0 for values 0..15 and s1 for 16..31 (q signed bytes).
SPECCHAT_DQ inline void store_mul_i8(__m256i q, __m256 s0, __m256 s1, float* y) {
  __m256 f[4];
  widen32<false>(q, f);
  _mm256_storeu_ps(y, _mm256_mul_ps(s0, f[0]));
  _mm256_storeu_ps(y + 8, _mm256_mul_ps(s0, f[1]));
  _mm256_storeu_ps(y + 16, _mm256_mul_ps(s1, f[2]));
  _mm256_storeu_ps(y + 24, _mm256_mul_ps(s1, f[3]));
}

// y[0..31] = fma(d1, q, −m1) (q unsigned bytes).
SPECCHAT_DQ inline void store_fms_u8(__m256i q, __m256 d1, __m256 m1, float* y) {
  __m256 f[4];
  widen32<true>(q, f);
  for (int i = 0; i < 4; ++i) _mm256_storeu_ps(y + 8 * i, _mm256_fmsub_ps(d1, f[i], m1));
}

// The f16 scale as f32 with F16C (exact, like cpu::f16_to_f32, without its out-of-line call per
// block; only a signalling NaN's payload can differ: F16C quiets it).
SPECCHAT_DQ inline float half(uint16_t h) { return _cvtsh_ss(h); }

SPECCHAT_DQ inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

SPECCHAT_DQ void deq_q8_0(const BlockQ8_0* b, float* y) {
  const __m256 d = _mm256_set1_ps(half(b->d));
  for (int i = 0; i < 4; ++i) {  // 8 bytes at a time, widened straight from memory
    const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + 8 * i));
    _mm256_storeu_ps(y + 8 * i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8))));
  }
}

SPECCHAT_DQ void deq_q4_0(const BlockQ4_0* b, float* y) {
  const __m256 d = _mm256_set1_ps(half(b->d));
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
  const __m256i q = _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
  store_mul_i8(q, d, d, y);
}

// q4_K and q5_K share the scale handling; Q5 adds the fifth bit from qh.
template <bool Q5, typename Block>
SPECCHAT_DQ void deq_k45(const Block* b, const uint8_t* qh, float* y) {
  const float d = half(b->d), dmin = half(b->dmin);
  const __m256i m4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  __m256i h = _mm256_setzero_si256();
  if constexpr (Q5) h = load32(qh);
  for (int g = 0; g < 4; ++g) {
    const __m256i raw = load32(b->qs + 32 * g);
    __m256i q[2] = {_mm256_and_si256(raw, m4), _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4)};
    for (int k = 0; k < 2; ++k) {
      const int s = 2 * g + k;
      if constexpr (Q5) {
        // bit s of each qh byte moved to bit 4 (the shifts stay inside each byte after the mask)
        const __m128i cnt = _mm_cvtsi32_si128(s);
        const __m256i hb = _mm256_and_si256(_mm256_slli_epi16(_mm256_srl_epi16(h, cnt), 4), bit4);
        q[k] = _mm256_or_si256(q[k], hb);
      }
      uint8_t sc, m;
      scale_min_k4(s, b->scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
      store_fms_u8(q[k], _mm256_set1_ps(d1), _mm256_set1_ps(m1), y + 32 * s);
    }
  }
}

// Bits shift..shift+1 of each byte of qh, at bits 4-5 (a lambda would not inherit the target).
SPECCHAT_DQ inline __m256i high2(__m256i qh, int shift, __m256i m2) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(shift)), m2), 4);
}

SPECCHAT_DQ void deq_q6k(const BlockQ6K* b, float* y) {
  const float d = half(b->d);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03), off = _mm256_set1_epi8(32);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = load32(b->ql + 64 * h), l1 = load32(b->ql + 64 * h + 32), qh = load32(b->qh + 32 * h);
    const __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(l0, m4), high2(qh, 0, m2)),
                          _mm256_or_si256(_mm256_and_si256(l1, m4), high2(qh, 2, m2)),
                          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), high2(qh, 4, m2)),
                          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), high2(qh, 6, m2))};
    for (int k = 0; k < 4; ++k) {
      const int s = 8 * h + 2 * k;
      const __m256 s0 = _mm256_set1_ps(d * static_cast<float>(b->scales[s]));
      const __m256 s1 = _mm256_set1_ps(d * static_cast<float>(b->scales[s + 1]));
      store_mul_i8(_mm256_sub_epi8(q[k], off), s0, s1, y + 128 * h + 32 * k);
    }
  }
}

}  // namespace

bool dequant_avx2_supported() {
  return cpu_has_avx2_fma_f16c();
}

namespace {

// Blocks [0, nb) of one type: the type dispatch stays outside the per-block loop.
template <typename Block, typename F>
SPECCHAT_DQ inline void each_block(const void* src, float* dst, int64_t nb, int bs, F deq) {
  const auto* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < nb; ++i) deq(b + i, dst + i * bs);
}

SPECCHAT_DQ void deq_q4k_block(const BlockQ4K* b, float* y) { deq_k45<false>(b, nullptr, y); }
SPECCHAT_DQ void deq_q5k_block(const BlockQ5K* b, float* y) { deq_k45<true>(b, b->qh, y); }

}  // namespace

SPECCHAT_DQ void dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n) {
  if (!dtype_is_block(t) || n % dtype_block_size(t) != 0) {
    throw std::invalid_argument(std::string("dequantize_row_avx2: ") + std::to_string(n) + " values of " +
                                dtype_name(t));
  }
  const int bs = dtype_block_size(t);
  const int64_t nb = n / bs;
  switch (t) {
    case DType::q8_0: each_block<BlockQ8_0>(src, dst, nb, bs, deq_q8_0); break;
    case DType::q4_0: each_block<BlockQ4_0>(src, dst, nb, bs, deq_q4_0); break;
    case DType::q4_k: each_block<BlockQ4K>(src, dst, nb, bs, deq_q4k_block); break;
    case DType::q5_k: each_block<BlockQ5K>(src, dst, nb, bs, deq_q5k_block); break;
    case DType::q6_k: each_block<BlockQ6K>(src, dst, nb, bs, deq_q6k); break;
    default: break;
  }
}

#else

bool dequant_avx2_supported() { return false; }

void dequantize_row_avx2(DType, const void*, float*, int64_t) {
  throw std::invalid_argument("dequantize_row_avx2: not an x86-64 build");
}

#endif

}  // namespace specchat::cpu
