// The SIMD variants of cpu::linear's integer path (linear_q8.h) for Form::b32 (q8_0 and q4_0;
// q4_K, q5_K and q6_K are in linear_q8k_x86.cpp): AVX2 (maddubs/madd: every product pair fits in
// 16 bits, see each type) and AVX-512 VNNI (vpdpbusd: four u8 × s8 products into each 32-bit
// lane). Both compute the integer lane sums of linear_q8.h exactly and then its
// f32 operations in its order, so they give the scalar twin's bits.
//
// Signed weights against the unsigned operand: AVX2 moves the weight's sign onto the activation
// (|w| × sign(a, w)); AVX-512 adds an offset c to the weights (u = w + c, c = 128 for q8_0, 8 for
// q4_0: 0..255) and starts the lane from −c · Σ a over the lane's four activations.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <cstring>

#include "kernels/cpu/linear_q8_x86.h"

namespace specchat::cpu::q8 {

using tiling::hsum;
using tiling::kRows;

SPECCHAT_AVX2 void quantize_avx2(const float* x, int r0, int r1, int n_in, Act& out) {
  const int nb = n_in / kBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    for (int b = 0; b < nb; ++b) {
      const float* p = xr + kBlock * b;
      const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8), v2 = _mm256_loadu_ps(p + 16),
                   v3 = _mm256_loadu_ps(p + 24);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                               _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float amax = _mm_cvtss_f32(m4);
      const __m256 unord = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(v0, v0, _CMP_UNORD_Q), _mm256_cmp_ps(v1, v1, _CMP_UNORD_Q)),
                                        _mm256_or_ps(_mm256_cmp_ps(v2, v2, _CMP_UNORD_Q), _mm256_cmp_ps(v3, v3, _CMP_UNORD_Q)));
      const float d = _mm256_movemask_ps(unord) ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
      const __m256 id = _mm256_set1_ps(d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f);
      const __m256i i0 = round8(v0, id), i1 = round8(v1, id), i2 = round8(v2, id), i3 = round8(v3, id);
      // packs interleave 128-bit halves: [i0 lo, i1 lo, i0 hi, i1 hi] etc.; permute back to order.
      const __m256i p16a = _mm256_packs_epi32(i0, i1), p16b = _mm256_packs_epi32(i2, i3);
      const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
      const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + kBlock * b), ordered);
      out.d[static_cast<size_t>(t) * nb + b] = d;
    }
  }
}

namespace {

// G rows of x (tk ..) against R weight rows wr[0 .. R) (a short block repeats its last row, not
// stored): each weight group is unpacked once for the G rows. Per row of x the operations do not
// depend on R or G.
template <int R, int G>
SPECCHAT_AVX2 void rows_rg_avx2(const Act& a, int tk, const uint8_t* const wr[], DType t, float* y, int n_out, int j0,
                                int nr) {
  const int8_t* aq[G];
  const float* da[G];
  for (int g = 0; g < G; ++g) aq[g] = a.qrow(tk + g), da[g] = a.drow(tk + g);
  const int n_in = a.n_in;
  __m256 F[2][R][G];
  for (int q = 0; q < R; ++q) {
    for (int g = 0; g < G; ++g) F[0][q][g] = F[1][q][g] = _mm256_setzero_ps();
  }
  const __m256i ones = _mm256_set1_epi8(1);
  switch (t) {
    case DType::q8_0:
      for (int b = 0; b < n_in / 32; ++b) {
        __m256i x[G];
        for (int g = 0; g < G; ++g) x[g] = load32(aq[g] + 32 * b);
        if (b % 2 == 0) {
          for (int q = 0; q < R; ++q) prefetch_block(wr[q] + b * sizeof(BlockQ8_0), 2 * sizeof(BlockQ8_0));
        }
        for (int q = 0; q < R; ++q) {
          const BlockQ8_0& k = reinterpret_cast<const BlockQ8_0*>(wr[q])[b];
          const __m256i w = load32(k.qs);  // |w| <= 128, |a| <= 127: pairs fit in 16 bits
          const __m256i aw = _mm256_abs_epi8(w);
          const float dw = _cvtsh_ss(k.d);
          for (int g = 0; g < G; ++g) {
            const __m256i L = dot4(aw, _mm256_sign_epi8(x[g], w));
            F[b & 1][q][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(L), _mm256_set1_ps(dw * da[g][b]), F[b & 1][q][g]);
          }
        }
      }
      break;
    case DType::q4_0:
      for (int b = 0; b < n_in / 32; ++b) {
        __m256i x[G], off[G];
        for (int g = 0; g < G; ++g) {
          x[g] = load32(aq[g] + 32 * b);
          off[g] = _mm256_slli_epi32(dot4(ones, x[g]), 3);  // 8 · Σ a per lane
        }
        if (b % 4 == 0) {
          for (int q = 0; q < R; ++q) prefetch_block(wr[q] + b * sizeof(BlockQ4_0), 4 * sizeof(BlockQ4_0));
        }
        for (int q = 0; q < R; ++q) {
          const BlockQ4_0& k = reinterpret_cast<const BlockQ4_0*>(wr[q])[b];
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.qs));
          const __m128i m4 = _mm_set1_epi8(0x0F);
          const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
          const float dw = _cvtsh_ss(k.d);
          for (int g = 0; g < G; ++g) {
            const __m256i L = _mm256_sub_epi32(dot4(u, x[g]), off[g]);
            F[b & 1][q][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(L), _mm256_set1_ps(dw * da[g][b]), F[b & 1][q][g]);
          }
        }
      }
      break;
    default: break;
  }
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < std::min(R, nr); ++q) out[q] = hsum(_mm256_add_ps(F[0][q][g], F[1][q][g]));
  }
}

}  // namespace

SPECCHAT_AVX2 void rows_avx2(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  const size_t row_bytes = dtype_row_bytes(t, static_cast<uint64_t>(a.n_in));
  const uint8_t* wr[kRows];
  for (int q = 0; q < kRows; ++q) wr[q] = static_cast<const uint8_t*>(w) + static_cast<size_t>(j0 + std::min(q, nr - 1)) * row_bytes;
  if (form_for(t) != Form::b32) return rows_k256_avx2(a, wr, t, y, n_out, j0, nr);
  // 16 registers: a lone row of x takes the 4 weight rows at once (8 accumulators); pairs of rows
  // take 2 weight rows at a time (8 accumulators), so the weights are unpacked once per pair.
  int tk = 0;
  for (; tk + 2 <= a.n_rows; tk += 2) {
    rows_rg_avx2<2, 2>(a, tk, wr, t, y, n_out, j0, nr);
    if (nr > 2) rows_rg_avx2<2, 2>(a, tk, wr + 2, t, y, n_out, j0 + 2, nr - 2);
  }
  if (tk < a.n_rows) rows_rg_avx2<kRows, 1>(a, tk, wr, t, y, n_out, j0, nr);
}

// ---------------------------------------------------------------------------------------------
// AVX-512 VNNI


// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on its `__m512 __Y = __Y;` idiom
// (GCC bug 105593, fixed in GCC 13): silenced for the AVX-512 functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

SPECCHAT_VNNI void quantize_avx512(const float* x, int r0, int r1, int n_in, Act& out) {
  const int nb = n_in / kBlock;
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    for (int b = 0; b < nb; ++b) {
      const __m512 v0 = _mm512_loadu_ps(xr + kBlock * b), v1 = _mm512_loadu_ps(xr + kBlock * b + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const bool nan = (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) != 0;
      const float d = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
      const __m512 id = _mm512_set1_ps(d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f);
      const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
      const __m512i i0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, id), lo), hi));
      const __m512i i1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, id), lo), hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + kBlock * b), _mm512_cvtepi32_epi8(i0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + kBlock * b + 16), _mm512_cvtepi32_epi8(i1));
      out.d[static_cast<size_t>(t) * nb + b] = d;
    }
  }
}

namespace {


// −c · Σ a over each lane's four activations (c = 2^shift): the start of a lane whose weights
// carry the offset c.
template <int Shift>
SPECCHAT_VNNI inline __m512i neg_offset(__m512i x) {
  const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), x);
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(s, Shift));
}

// [a × 8 | b × 8]
SPECCHAT_VNNI inline __m512 pair_ps(float a, float b) {
  return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b));
}

// Rows [tk, tk + G) of x against 4 weight rows; F[g][q] holds F0 in lanes 0-7, F1 in 8-15.
template <int G>
SPECCHAT_VNNI void group_avx512(const Act& a, int tk, const uint8_t* const wr[kRows], DType t, float* y, int n_out,
                                int j0, int nr) {
  const int8_t* aq[G];
  const float* da[G];
  for (int g = 0; g < G; ++g) aq[g] = a.qrow(tk + g), da[g] = a.drow(tk + g);
  const int n_in = a.n_in;
  __m512 F[G][kRows];
  for (int g = 0; g < G; ++g) {
    for (int q = 0; q < kRows; ++q) F[g][q] = _mm512_setzero_ps();
  }
  switch (t) {
    case DType::q8_0:
    case DType::q4_0: {
      const bool q8 = t == DType::q8_0;
      const int nb = n_in / 32;
      const size_t bb = q8 ? 2 * sizeof(BlockQ8_0) : 2 * sizeof(BlockQ4_0);
      for (int p = 0; p < nb / 2; ++p) {
        for (int q = 0; q < kRows; ++q) prefetch_block(wr[q] + p * bb, bb);
        __m512i xv[G], neg[G];
        __m512 dav[G];
        for (int g = 0; g < G; ++g) {
          xv[g] = load64(aq[g] + 64 * p);
          neg[g] = q8 ? neg_offset<7>(xv[g]) : neg_offset<3>(xv[g]);
          dav[g] = pair_ps(da[g][2 * p], da[g][2 * p + 1]);
        }
        for (int q = 0; q < kRows; ++q) {
          __m512i u;
          __m512 dw;
          if (q8) {
            const BlockQ8_0* k = reinterpret_cast<const BlockQ8_0*>(wr[q]) + 2 * p;
            u = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[0].qs))),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[1].qs)), 1);
            u = _mm512_xor_si512(u, _mm512_set1_epi8(static_cast<char>(0x80)));  // w + 128
            dw = pair_ps(_cvtsh_ss(k[0].d), _cvtsh_ss(k[1].d));
          } else {
            const BlockQ4_0* k = reinterpret_cast<const BlockQ4_0*>(wr[q]) + 2 * p;
            const __m256i raw = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k[1].qs)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(k[0].qs)));
            const __m256i m4 = _mm256_set1_epi8(0x0F);
            // [lo0 | lo1 | hi0 | hi1] -> [lo0 | hi0 | lo1 | hi1]: values 0-31 of each block in order
            const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(raw, m4)),
                                                 _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4), 1);
            u = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));  // q, i.e. w + 8
            dw = pair_ps(_cvtsh_ss(k[0].d), _cvtsh_ss(k[1].d));
          }
          for (int g = 0; g < G; ++g) {
            const __m512i L = _mm512_dpbusd_epi32(neg[g], u, xv[g]);
            F[g][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(L), _mm512_mul_ps(dw, dav[g]), F[g][q]);
          }
        }
      }
      if (nb % 2) {  // the last (even) block alone: lanes 0-7 (F0)
        const int b = nb - 1;
        __m256i xv[G], neg[G];
        for (int g = 0; g < G; ++g) {
          xv[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aq[g] + 32 * b));
          const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), xv[g]);
          neg[g] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(s, q8 ? 7 : 3));
        }
        for (int q = 0; q < kRows; ++q) {
          __m256i u;
          float dw;
          if (q8) {
            const BlockQ8_0& k = reinterpret_cast<const BlockQ8_0*>(wr[q])[b];
            u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.qs)),
                                 _mm256_set1_epi8(static_cast<char>(0x80)));
            dw = _cvtsh_ss(k.d);
          } else {
            const BlockQ4_0& k = reinterpret_cast<const BlockQ4_0*>(wr[q])[b];
            const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.qs));
            const __m128i m4 = _mm_set1_epi8(0x0F);
            u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
            dw = _cvtsh_ss(k.d);
          }
          for (int g = 0; g < G; ++g) {
            const __m256i L = _mm256_dpbusd_epi32(neg[g], u, xv[g]);
            const __m512 s = _mm512_set1_ps(dw * da[g][b]);
            F[g][q] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(_mm256_cvtepi32_ps(L)), s, F[g][q], 0x00FF);
          }
        }
      }
      break;
    }
    default: break;
  }
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < nr; ++q) {
      out[q] = hsum(_mm256_add_ps(_mm512_castps512_ps256(F[g][q]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(F[g][q]), 1))));
    }
  }
}

}  // namespace

SPECCHAT_VNNI void rows_avx512(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  const size_t row_bytes = dtype_row_bytes(t, static_cast<uint64_t>(a.n_in));
  const uint8_t* wr[kRows];
  for (int q = 0; q < kRows; ++q) wr[q] = static_cast<const uint8_t*>(w) + static_cast<size_t>(j0 + std::min(q, nr - 1)) * row_bytes;
  int tk = 0;
  if (form_for(t) != Form::b32) return rows_k256_avx512(a, wr, t, y, n_out, j0, nr);
  for (; tk + 4 <= a.n_rows; tk += 4) group_avx512<4>(a, tk, wr, t, y, n_out, j0, nr);
  if (tk + 2 <= a.n_rows) {
    group_avx512<2>(a, tk, wr, t, y, n_out, j0, nr);
    tk += 2;
  }
  if (tk < a.n_rows) group_avx512<1>(a, tk, wr, t, y, n_out, j0, nr);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace specchat::cpu::q8

#endif  // __x86_64__
