// The Form::k256 / k256n kernels of cpu::linear's integer path (linear_q8.h): q4_K, q5_K and
// q6_K weights against activations with one scale per 256 values (ggml's q8_K), sub-block scales
// applied in integers: AVX2 (maddubs, then madd with the scale) and AVX-512 VNNI (maddubs, then
// vpdpwssd). Both give the scalar twin's bits (linear_q8.cpp: dot_k256_generic, dot_q6k_generic).
#if defined(__x86_64__)

#include "kernels/cpu/linear_q8_x86.h"

#include <algorithm>
#include <limits>
#include <type_traits>

namespace specchat::cpu::q8 {

using tiling::hsum;
using tiling::kRows;

namespace {

// Rows [tk, tk + G) of a k256 / k256n activation set: integers, scales D and sums.
template <int G>
struct ActRows {
  const int8_t* aq[G];
  const float* D[G];
  const int16_t* bs[G];
  ActRows(const Act& a, int tk) {
    for (int g = 0; g < G; ++g) aq[g] = a.qrow(tk + g), D[g] = a.drow(tk + g), bs[g] = a.brow(tk + g);
  }
};

// y[tk + g, j0 + q] = hsum(F[0..8) + F[8..16)) for the AVX2 kernels' accumulators F[q][g][16].
template <int R, int G>
SPECCHAT_AVX2 void store_avx2(const float (&F)[R][G][16], float* y, int tk, int n_out, int j0, int nr) {
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < std::min(R, nr); ++q) out[q] = hsum(_mm256_add_ps(_mm256_load_ps(F[q][g]), _mm256_load_ps(F[q][g] + 8)));
  }
}

}  // namespace

SPECCHAT_AVX2 void quantize_k256_avx2(const float* x, int r0, int r1, int n_in, Act& out) {
  const int nS = n_in / 256;
  const bool natural = out.form == Form::k256n;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    int16_t* bsum = out.bsum.data() + static_cast<int64_t>(t) * (n_in / out.bsum_span());
    for (int S = 0; S < nS; ++S) {
      const float* p = xr + 256 * S;
      __m256 m = _mm256_setzero_ps(), unord = _mm256_setzero_ps();
      for (int i = 0; i < 256; i += 8) {
        const __m256 v = _mm256_loadu_ps(p + i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
        unord = _mm256_or_ps(unord, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
      const float d = _mm256_movemask_ps(unord) ? std::numeric_limits<float>::quiet_NaN() : _mm_cvtss_f32(m4) / 127.0f;
      const __m256 id = _mm256_set1_ps(d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f);
      for (int j = 0; j < 8; ++j) {
        const float* b = p + 32 * j;
        const __m256i i0 = round8(_mm256_loadu_ps(b), id), i1 = round8(_mm256_loadu_ps(b + 8), id),
                      i2 = round8(_mm256_loadu_ps(b + 16), id), i3 = round8(_mm256_loadu_ps(b + 24), id);
        if (natural) {
          bsum[16 * S + 2 * j] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(i0, i1)));
          bsum[16 * S + 2 * j + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(i2, i3)));
        } else {
          bsum[8 * S + j] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3))));
        }
        const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 256 * S + (natural ? 32 * j : k256_pos(32 * j))), ordered);
      }
      out.d[static_cast<size_t>(t) * nS + S] = d;
    }
  }
}

namespace {

// q4_K / q5_K (Q5) against Form::k256 activations (linear_q8.h's 16 lanes as two registers:
// group A of sub-blocks {0, 1, 4, 5} and group B {2, 3, 6, 7}): G rows of x against R weight rows.
template <bool Q5, int R, int G>
SPECCHAT_AVX2 void rows_k256_avx2(const Act& a, int tk, const uint8_t* const wr[], float* y, int n_out, int j0, int nr) {
  using Block = std::conditional_t<Q5, BlockQ5K, BlockQ4K>;
  const ActRows<G> r(a, tk);
  const auto& aq = r.aq;
  const auto& D = r.D;
  const auto& bs = r.bs;
  alignas(32) float F[R][G][16] = {};
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int S = 0; S < a.n_in / 256; ++S) {
    alignas(16) uint8_t sm[R][16];
    const Block* k[R];
    for (int q = 0; q < R; ++q) {
      k[q] = reinterpret_cast<const Block*>(wr[q]) + S;
      prefetch_block(reinterpret_cast<const uint8_t*>(k[q]), sizeof(Block));
      k4_scale_bytes(k[q]->scales, sm[q]);
    }
    __m256i I[R][G][2];
    for (int q = 0; q < R; ++q) {
      for (int g = 0; g < G; ++g) I[q][g][0] = I[q][g][1] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {  // unrolled: grp must be a constant for I to stay in registers
      const int grp = (j % 4) >= 2 ? 1 : 0;
      __m256i x[G];
      for (int g = 0; g < G; ++g) x[g] = load32(aq[g] + 256 * S + k256_pos(32 * j));
      for (int q = 0; q < R; ++q) {
        const __m256i raw = load32(k[q]->qs + 32 * (j / 2));
        __m256i u = _mm256_and_si256((j & 1) ? _mm256_srli_epi16(raw, 4) : raw, m4);  // u <= 31
        if constexpr (Q5) {  // bit j of qh[i] to bit 4 (16-bit shifts: the mask drops what crosses bytes)
          const __m256i h = load32(k[q]->qh);
          const __m256i b = j <= 4 ? _mm256_slli_epi16(h, 4 - j) : _mm256_srli_epi16(h, j - 4);
          u = _mm256_or_si256(u, _mm256_and_si256(b, _mm256_set1_epi8(0x10)));
        }
        const __m256i sc = _mm256_set1_epi16(static_cast<short>(sm[q][j]));
        for (int g = 0; g < G; ++g) {
          I[q][g][grp] = _mm256_add_epi32(I[q][g][grp], _mm256_madd_epi16(_mm256_maddubs_epi16(u, x[g]), sc));
        }
      }
    }
    for (int q = 0; q < R; ++q) {
      const __m128i mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm[q] + 8)));
      const float dw = _cvtsh_ss(k[q]->d), dmw = _cvtsh_ss(k[q]->dmin);
      for (int g = 0; g < G; ++g) {
        const __m256 dd = _mm256_set1_ps(dw * D[g][S]), mm = _mm256_set1_ps(-(dmw * D[g][S]));
        const __m128i Mi = _mm_madd_epi16(mins, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bs[g] + 8 * S)));
        __m256 fa = _mm256_load_ps(F[q][g]), fb = _mm256_load_ps(F[q][g] + 8);
        fa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[q][g][0]), dd, fa);
        fb = _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[q][g][1]), dd, fb);
        fa = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_zextsi128_si256(Mi)), mm, fa);
        fb = _mm256_fmadd_ps(_mm256_setzero_ps(), mm, fb);
        _mm256_store_ps(F[q][g], fa);
        _mm256_store_ps(F[q][g] + 8, fb);
      }
    }
  }
  store_avx2(F, y, tk, n_out, j0, nr);
}

// q6_K group gi (values 32gi .. 32gi + 31) as unsigned 6-bit values (the − 32 is applied through
// the activation sums).
SPECCHAT_AVX2 inline __m256i q6_u(const BlockQ6K& k, int gi) {
  const int h = gi / 4, g = gi % 4;
  const __m256i l = load32(k.ql + 64 * h + 32 * (g & 1));
  const __m256i lo = _mm256_and_si256(g >= 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(load32(k.qh + 32 * h), 2 * g), _mm256_set1_epi8(0x03));
  return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
}

// q6_K against Form::k256n activations: G rows of x against R weight rows (linear_q8.h's 16 lanes
// as two registers: even groups of 32 values in lanes 0-7, odd ones in 8-15).
template <int R, int G>
SPECCHAT_AVX2 void rows_q6k_avx2(const Act& a, int tk, const uint8_t* const wr[], float* y, int n_out, int j0, int nr) {
  const ActRows<G> r(a, tk);
  const auto& aq = r.aq;
  const auto& D = r.D;
  const auto& bs = r.bs;
  alignas(32) float F[R][G][16] = {};
  for (int S = 0; S < a.n_in / 256; ++S) {
    const BlockQ6K* k[R];
    for (int q = 0; q < R; ++q) {
      k[q] = reinterpret_cast<const BlockQ6K*>(wr[q]) + S;
      prefetch_block(reinterpret_cast<const uint8_t*>(k[q]), sizeof(BlockQ6K));
    }
    __m256i I[R][G][2];
    for (int q = 0; q < R; ++q) {
      for (int g = 0; g < G; ++g) I[q][g][0] = I[q][g][1] = _mm256_setzero_si256();
    }
#pragma GCC unroll 8
    for (int gi = 0; gi < 8; ++gi) {  // unrolled: gi & 1 must be a constant for I to stay in registers
      __m256i x[G];
      for (int g = 0; g < G; ++g) x[g] = load32(aq[g] + 256 * S + 32 * gi);
      for (int q = 0; q < R; ++q) {
        const __m256i u = q6_u(*k[q], gi);  // u <= 63
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(k[q]->scales[2 * gi + 1]), _mm_set1_epi16(k[q]->scales[2 * gi]));
        for (int g = 0; g < G; ++g) {
          I[q][g][gi & 1] = _mm256_add_epi32(I[q][g][gi & 1], _mm256_madd_epi16(_mm256_maddubs_epi16(u, x[g]), sc));
        }
      }
    }
    for (int q = 0; q < R; ++q) {
      const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k[q]->scales)));
      const float dw = _cvtsh_ss(k[q]->d);
      for (int g = 0; g < G; ++g) {
        const __m256i ms = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs[g] + 16 * S)));
        const __m256i ia = _mm256_add_epi32(I[q][g][0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(-32 * hsum_i32(ms))));
        const __m256 dd = _mm256_set1_ps(dw * D[g][S]);
        _mm256_store_ps(F[q][g], _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia), dd, _mm256_load_ps(F[q][g])));
        _mm256_store_ps(F[q][g] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(I[q][g][1]), dd, _mm256_load_ps(F[q][g] + 8)));
      }
    }
  }
  store_avx2(F, y, tk, n_out, j0, nr);
}

}  // namespace

SPECCHAT_AVX2 void rows_k256_avx2(const Act& a, const uint8_t* const wr[], DType t, float* y, int n_out, int j0, int nr) {
  if (t == DType::q6_k) {
    int tk = 0;
    for (; tk + 2 <= a.n_rows; tk += 2) {
      rows_q6k_avx2<2, 2>(a, tk, wr, y, n_out, j0, nr);
      if (nr > 2) rows_q6k_avx2<2, 2>(a, tk, wr + 2, y, n_out, j0 + 2, nr - 2);
    }
    if (tk < a.n_rows) rows_q6k_avx2<kRows, 1>(a, tk, wr, y, n_out, j0, nr);
    return;
  }
  const bool q5 = t == DType::q5_k;
  int tk = 0;
  for (; tk + 2 <= a.n_rows; tk += 2) {
    (q5 ? rows_k256_avx2<true, 2, 2> : rows_k256_avx2<false, 2, 2>)(a, tk, wr, y, n_out, j0, nr);
    if (nr > 2) (q5 ? rows_k256_avx2<true, 2, 2> : rows_k256_avx2<false, 2, 2>)(a, tk, wr + 2, y, n_out, j0 + 2, nr - 2);
  }
  if (tk < a.n_rows) (q5 ? rows_k256_avx2<true, kRows, 1> : rows_k256_avx2<false, kRows, 1>)(a, tk, wr, y, n_out, j0, nr);
}

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on its `__m512 __Y = __Y;` idiom
// (GCC bug 105593, fixed in GCC 13): silenced for the AVX-512 functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace {

template <int G>
SPECCHAT_VNNI void zero_avx512(__m512 (&F)[G][kRows]) {
  for (int g = 0; g < G; ++g) {
    for (int q = 0; q < kRows; ++q) F[g][q] = _mm512_setzero_ps();
  }
}

// y[tk + g, j0 + q] = hsum(F[g][q] lanes 0-7 + lanes 8-15), q < nr.
template <int G>
SPECCHAT_VNNI void store_avx512(const __m512 (&F)[G][kRows], float* y, int tk, int n_out, int j0, int nr) {
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < nr; ++q) {
      out[q] = hsum(_mm256_add_ps(_mm512_castps512_ps256(F[g][q]), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(F[g][q]), 1))));
    }
  }
}

}  // namespace

SPECCHAT_VNNI void quantize_k256_avx512(const float* x, int r0, int r1, int n_in, Act& out) {
  const int nS = n_in / 256;
  const bool natural = out.form == Form::k256n;
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    int16_t* bsum = out.bsum.data() + static_cast<int64_t>(t) * (n_in / out.bsum_span());
    for (int S = 0; S < nS; ++S) {
      const float* p = xr + 256 * S;
      __m512 m = _mm512_setzero_ps();
      __mmask16 nan = 0;
      for (int i = 0; i < 256; i += 16) {
        const __m512 v = _mm512_loadu_ps(p + i);
        m = _mm512_max_ps(m, _mm512_abs_ps(v));
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      }
      const float d = nan ? std::numeric_limits<float>::quiet_NaN() : _mm512_reduce_max_ps(m) / 127.0f;
      const __m512 id = _mm512_set1_ps(d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f);
      for (int j = 0; j < 8; ++j) {
        const float* b = p + 32 * j;
        const __m512i i0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(b), id), lo), hi));
        const __m512i i1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(_mm512_loadu_ps(b + 16), id), lo), hi));
        int8_t* dst = q + 256 * S + (natural ? 32 * j : k256_pos(32 * j));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(i0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 16), _mm512_cvtepi32_epi8(i1));
        if (natural) {
          bsum[16 * S + 2 * j] = static_cast<int16_t>(_mm512_reduce_add_epi32(i0));
          bsum[16 * S + 2 * j + 1] = static_cast<int16_t>(_mm512_reduce_add_epi32(i1));
        } else {
          bsum[8 * S + j] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1)));
        }
      }
      out.d[static_cast<size_t>(t) * nS + S] = d;
    }
  }
}

namespace {

// q4_K / q5_K (Q5) against Form::k256 activations, rows [tk, tk + G) of x against 4 weight rows: per 64 bytes
// of nibbles, two 64-value registers (low nibbles: sub-blocks 4p and 4p + 2; high: 4p + 1 and
// 4p + 3), maddubs with the activations stored in that order, then vpdpwssd with the sub-block
// scales as 16-bit lanes: linear_q8.h's 16 integer lanes directly.
template <bool Q5, int G>
SPECCHAT_VNNI void group_k256_avx512(const Act& a, int tk, const uint8_t* const wr[kRows], float* y, int n_out, int j0,
                                     int nr) {
  using Block = std::conditional_t<Q5, BlockQ5K, BlockQ4K>;
  const ActRows<G> r(a, tk);
  const auto& aq = r.aq;
  const auto& D = r.D;
  const auto& bs = r.bs;
  __m512 F[G][kRows];
  zero_avx512(F);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // Chunk c = 2p + h (h: 0 low nibbles, 1 high): 16-bit lanes 0-15 take scale 4p + h, 16-31 4p + 2 + h.
  // q5_K: the same chunk's fifth bits are bit A (bytes 0-31) and A + 2 (bytes 32-63) of qh.
  __m512i sidx[4], hcnt[4];
  for (int c = 0; c < 4; ++c) {
    const int A = 4 * (c / 2) + c % 2;
    sidx[c] = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(A)),
                                      _mm512_set1_epi16(static_cast<short>(A + 2)));
    hcnt[c] = sidx[c];
  }
  const __m512i b4 = _mm512_set1_epi8(0x10);
  for (int S = 0; S < a.n_in / 256; ++S) {
    const Block* k[kRows];
    __m512i sc16[kRows];
    __m128i mins[kRows];
    for (int q = 0; q < kRows; ++q) {
      k[q] = reinterpret_cast<const Block*>(wr[q]) + S;
      prefetch_block(reinterpret_cast<const uint8_t*>(k[q]), sizeof(Block));
      const __m256i v = _mm256_cvtepu8_epi16(k4_scale_bytes_v(k[q]->scales));
      sc16[q] = _mm512_castsi256_si512(v);  // lanes 0-7 the scales (the index reads only those)
      mins[q] = _mm256_extracti128_si256(v, 1);
    }
    __m512i I[G][kRows];
    for (int g = 0; g < G; ++g) {
      for (int q = 0; q < kRows; ++q) I[g][q] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int p = 0; p < 2; ++p) {
      __m512i xl[G], xh[G];
      for (int g = 0; g < G; ++g) {
        xl[g] = load64(aq[g] + 256 * S + 128 * p);
        xh[g] = load64(aq[g] + 256 * S + 128 * p + 64);
      }
      for (int q = 0; q < kRows; ++q) {
        const __m512i raw = load64(k[q]->qs + 64 * p);
        __m512i ul = _mm512_and_si512(raw, m4), uh = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
        if constexpr (Q5) {  // bit j of qh[i]: the fifth bit of value i of sub-block j
          const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[q]->qh)));
          ul = _mm512_or_si512(ul, _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(hb, hcnt[2 * p]), 4), b4));
          uh = _mm512_or_si512(uh, _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(hb, hcnt[2 * p + 1]), 4), b4));
        }
        const __m512i sl = _mm512_permutexvar_epi16(sidx[2 * p], sc16[q]);
        const __m512i sh = _mm512_permutexvar_epi16(sidx[2 * p + 1], sc16[q]);
        for (int g = 0; g < G; ++g) {
          I[g][q] = _mm512_dpwssd_epi32(I[g][q], _mm512_maddubs_epi16(ul, xl[g]), sl);
          I[g][q] = _mm512_dpwssd_epi32(I[g][q], _mm512_maddubs_epi16(uh, xh[g]), sh);
        }
      }
    }
    // [D, −D] per row of x, times [d, dmin] (the block's two f16 scales in one load): d · D and
    // −(dmin · D), the same f32 products as scalar code (negation is exact).
    __m128 Dn[G];
    for (int g = 0; g < G; ++g) Dn[g] = _mm_mul_ps(_mm_set1_ps(D[g][S]), _mm_setr_ps(1.0f, -1.0f, 1.0f, -1.0f));
    for (int q = 0; q < kRows; ++q) {
      uint32_t dpair;
      std::memcpy(&dpair, &k[q]->d, 4);  // d, dmin
      const __m128 dq = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dpair)));
      for (int g = 0; g < G; ++g) {
        const __m128 s = _mm_mul_ps(dq, Dn[g]);
        const __m128i Mi = _mm_madd_epi16(mins[q], _mm_loadu_si128(reinterpret_cast<const __m128i*>(bs[g] + 8 * S)));
        F[g][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(I[g][q]), _mm512_broadcastss_ps(s), F[g][q]);
        F[g][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi128_si512(Mi)), _mm512_broadcastss_ps(_mm_movehdup_ps(s)), F[g][q]);
      }
    }
  }
  store_avx512(F, y, tk, n_out, j0, nr);
}

// q6_K against Form::k256n activations, rows [tk, tk + G) of x against 4 weight rows: chunk c
// (values 64c .. 64c + 63) is the low (c even) or high (c odd) nibbles of ql[64 (c / 2) ..] with
// two bits of qh; maddubs with the activations, vpdpwssd with the sub-block scales (each over 8
// 16-bit lanes).
template <int G>
SPECCHAT_VNNI void group_q6k_avx512(const Act& a, int tk, const uint8_t* const wr[kRows], float* y, int n_out, int j0,
                                    int nr) {
  const ActRows<G> r(a, tk);
  const auto& aq = r.aq;
  const auto& D = r.D;
  const auto& bs = r.bs;
  __m512 F[G][kRows];
  zero_avx512(F);
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
  __m512i sidx[4], hcnt[2];
  for (int c = 0; c < 4; ++c) {  // 16-bit lane k of chunk c: sub-block 4c + k / 8
    sidx[c] = _mm512_add_epi16(_mm512_set1_epi16(static_cast<short>(4 * c)),
                               _mm512_srli_epi16(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                                                                  14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), 3));
  }
  for (int odd = 0; odd < 2; ++odd) {  // qh bits 2g of value i: bytes 0-31 g = 2 odd, 32-63 g = 2 odd + 1
    hcnt[odd] = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(4 * odd)),
                                        _mm512_set1_epi16(static_cast<short>(4 * odd + 2)));
  }
  for (int S = 0; S < a.n_in / 256; ++S) {
    const BlockQ6K* k[kRows];
    __m512i sc16[kRows];
    for (int q = 0; q < kRows; ++q) {
      k[q] = reinterpret_cast<const BlockQ6K*>(wr[q]) + S;
      prefetch_block(reinterpret_cast<const uint8_t*>(k[q]), sizeof(BlockQ6K));
      sc16[q] = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(k[q]->scales))));
    }
    __m512i I[G][kRows];
    for (int g = 0; g < G; ++g) {
      for (int q = 0; q < kRows; ++q) I[g][q] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const int h = c / 2, odd = c & 1;
      __m512i xv[G];
      for (int g = 0; g < G; ++g) xv[g] = load64(aq[g] + 256 * S + 64 * c);
      for (int q = 0; q < kRows; ++q) {
        __m512i lo = load64(k[q]->ql + 64 * h);
        lo = _mm512_and_si512(odd ? _mm512_srli_epi16(lo, 4) : lo, m4);
        const __m512i hb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k[q]->qh + 32 * h)));
        const __m512i hi = _mm512_and_si512(_mm512_srlv_epi16(hb, hcnt[odd]), m2);
        const __m512i u = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));  // u <= 63
        const __m512i sv = _mm512_permutexvar_epi16(sidx[c], sc16[q]);
        for (int g = 0; g < G; ++g) I[g][q] = _mm512_dpwssd_epi32(I[g][q], _mm512_maddubs_epi16(u, xv[g]), sv);
      }
    }
    for (int q = 0; q < kRows; ++q) {
      const __m256i s16 = _mm512_castsi512_si256(sc16[q]);
      const float dw = _cvtsh_ss(k[q]->d);
      for (int g = 0; g < G; ++g) {
        const __m256i ms = _mm256_madd_epi16(s16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs[g] + 16 * S)));
        const __m512i ia = _mm512_add_epi32(I[g][q], _mm512_zextsi128_si512(_mm_cvtsi32_si128(-32 * hsum_i32(ms))));
        F[g][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_set1_ps(dw * D[g][S]), F[g][q]);
      }
    }
  }
  store_avx512(F, y, tk, n_out, j0, nr);
}

}  // namespace

SPECCHAT_VNNI void rows_k256_avx512(const Act& a, const uint8_t* const wr[], DType t, float* y, int n_out, int j0, int nr) {
  int tk = 0;
  if (t == DType::q6_k) {
    for (; tk + 4 <= a.n_rows; tk += 4) group_q6k_avx512<4>(a, tk, wr, y, n_out, j0, nr);
    if (tk + 2 <= a.n_rows) {
      group_q6k_avx512<2>(a, tk, wr, y, n_out, j0, nr);
      tk += 2;
    }
    if (tk < a.n_rows) group_q6k_avx512<1>(a, tk, wr, y, n_out, j0, nr);
    return;
  }
  const bool q5 = t == DType::q5_k;
  for (; tk + 4 <= a.n_rows; tk += 4) (q5 ? group_k256_avx512<true, 4> : group_k256_avx512<false, 4>)(a, tk, wr, y, n_out, j0, nr);
  if (tk + 2 <= a.n_rows) {
    (q5 ? group_k256_avx512<true, 2> : group_k256_avx512<false, 2>)(a, tk, wr, y, n_out, j0, nr);
    tk += 2;
  }
  if (tk < a.n_rows) (q5 ? group_k256_avx512<true, 1> : group_k256_avx512<false, 1>)(a, tk, wr, y, n_out, j0, nr);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace specchat::cpu::q8

#endif  // __x86_64__
