// Block-type weights dequantized in registers for decode-sized batches (cpu::linear, linear.h):
// per ISA, sources that give 32 values of one weight row at a time, exactly the f32 values
// dequantize_row_avx2 writes into the L1 tile (the same integer steps, the same scale products,
// the same fused multiply-subtract), consumed by the tile path's operations in the same order.
// So a row's result has the same bits whichever path runs it (batch invariance), and the
// kernel twin tests of tests/kernels/cpu/test_quant.cpp cover both sides of the thresholds
// (linear_tiling.h).
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cpu/dequant_simd.h"
#include "kernels/cpu/linear_tiling.h"
#include "kernels/cpu/quant.h"

namespace specchat::cpu::tiling {

#if defined(__x86_64__)

namespace {

// b[q] below: the chunk's first block of weight row q. Per-sub-block scales that need more than one
// operation are computed once per chunk (ChunkScales) instead of per group of values.
struct ChunkScales {
  alignas(64) float a[kRows][kChunk / 16];  // q4_K/q5_K: d·sc per 32 values; q6_K: d·scale per 16
  alignas(64) float m[kRows][kChunk / 32];  // q4_K/q5_K: dmin·m per 32 values
};

SPECCHAT_AVX2 inline __m256i load32b(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Sub-block s (0..7) of a q4_K/q5_K block as 32 unsigned values (deq_k45's integer steps).
template <bool Q5, typename Block>
SPECCHAT_AVX2 inline __m256i k45_values(const Block& k, int s) {
  const __m256i raw = load32b(k.qs + 32 * (s / 2));
  __m256i q = _mm256_and_si256((s & 1) ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
  if constexpr (Q5) {
    const __m256i h = _mm256_srl_epi16(load32b(k.qh), _mm_cvtsi32_si128(s));
    q = _mm256_or_si256(q, _mm256_and_si256(_mm256_slli_epi16(h, 4), _mm256_set1_epi8(0x10)));
  }
  return q;
}

// Group gi (0..7) of a q6_K block: values 32·gi .. 32·gi + 31 minus 32, signed (deq_q6k's steps).
SPECCHAT_AVX2 inline __m256i q6_values(const BlockQ6K& k, int gi) {
  const int h = gi / 4, g = gi % 4;
  const __m256i l = load32b(k.ql + 64 * h + 32 * (g & 1));
  const __m256i lo = _mm256_and_si256(g >= 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
  const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(load32b(k.qh + 32 * h), _mm_cvtsi32_si128(2 * g)),
                                      _mm256_set1_epi8(0x03));
  return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
}

// q4_0: the 32 values minus 8, signed.
SPECCHAT_AVX2 inline __m256i q4_0_values(const BlockQ4_0& k) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k.qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

// The AVX2 sources: group<GI>(q, bi, u) = values 32·GI .. 32·GI + 31 of block bi of weight
// row q, as 4 vectors of 8 floats.
struct Q8_0Rows8 {
  static constexpr int kBlock = 32;
  const BlockQ8_0* b[kRows];
  template <int GI>
  SPECCHAT_AVX2 void group(int q, int bi, __m256 u[4]) const {
    const BlockQ8_0& k = b[q][bi];
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(k.d));
    for (int i = 0; i < 4; ++i) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.qs + 8 * i));
      u[i] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8)));
    }
  }
};

struct Q4_0Rows8 {
  static constexpr int kBlock = 32;
  const BlockQ4_0* b[kRows];
  template <int GI>
  SPECCHAT_AVX2 void group(int q, int bi, __m256 u[4]) const {
    const BlockQ4_0& k = b[q][bi];
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(k.d));
    widen32<false>(q4_0_values(k), u);
    for (int i = 0; i < 4; ++i) u[i] = _mm256_mul_ps(d, u[i]);
  }
};

template <bool Q5, typename Block>
struct QK45Rows8 {
  static constexpr int kBlock = 256;
  const Block* b[kRows];
  const ChunkScales* sc;
  template <int GI>
  SPECCHAT_AVX2 void group(int q, int bi, __m256 u[4]) const {
    widen32<true>(k45_values<Q5>(b[q][bi], GI), u);
    const __m256 d1 = _mm256_set1_ps(sc->a[q][8 * bi + GI]), m1 = _mm256_set1_ps(sc->m[q][8 * bi + GI]);
    for (int i = 0; i < 4; ++i) u[i] = _mm256_fmsub_ps(d1, u[i], m1);
  }
  // d·sc and dmin·m of every sub-block of the chunk's kc columns, as deq_k45 computes them.
  SPECCHAT_AVX2 void fill(ChunkScales& out, int kc) const {
    for (int q = 0; q < kRows; ++q) {
      for (int bi = 0; bi < kc / 256; ++bi) {
        const Block& k = b[q][bi];
        const float d = _cvtsh_ss(k.d), dmin = _cvtsh_ss(k.dmin);
        for (int s = 0; s < 8; ++s) {
          uint8_t scv, mv;
          scale_min_k4(s, k.scales, &scv, &mv);
          out.a[q][8 * bi + s] = d * static_cast<float>(scv);
          out.m[q][8 * bi + s] = dmin * static_cast<float>(mv);
        }
      }
    }
  }
};

struct Q6KRows8 {
  static constexpr int kBlock = 256;
  const BlockQ6K* b[kRows];
  const ChunkScales* sc;
  template <int GI>
  SPECCHAT_AVX2 void group(int q, int bi, __m256 u[4]) const {
    widen32<false>(q6_values(b[q][bi], GI), u);
    const __m256 s0 = _mm256_set1_ps(sc->a[q][16 * bi + 2 * GI]), s1 = _mm256_set1_ps(sc->a[q][16 * bi + 2 * GI + 1]);
    u[0] = _mm256_mul_ps(s0, u[0]);
    u[1] = _mm256_mul_ps(s0, u[1]);
    u[2] = _mm256_mul_ps(s1, u[2]);
    u[3] = _mm256_mul_ps(s1, u[3]);
  }
  SPECCHAT_AVX2 void fill(ChunkScales& out, int kc) const {
    for (int q = 0; q < kRows; ++q) {
      for (int bi = 0; bi < kc / 256; ++bi) {
        const BlockQ6K& k = b[q][bi];
        const float d = _cvtsh_ss(k.d);
        for (int j = 0; j < 16; ++j) out.a[q][16 * bi + j] = d * static_cast<float>(k.scales[j]);
      }
    }
  }
};

// Rows [tk, tk + G) (G = 1 or 2) of x against one chunk of block-type weights dequantized in
// registers: per accumulator the tile path's operations (8-lane FMAs in column order, hsum),
// so the bits are the tile path's. One 32-value group of one weight row at a time (4 vectors
// live), its FMAs for every row of x.
template <int G, class R, int... GI>
SPECCHAT_AVX2 void rows_direct_avx2(const R& w, const float* x, float* y, int tk, int n_in, int n_out, int j0, int nr,
                                    int k0, int kc, std::integer_sequence<int, GI...>) {
  const float* xr[G];
  for (int g = 0; g < G; ++g) xr[g] = x + static_cast<int64_t>(tk + g) * n_in + k0;
  __m256 c[G][kRows];
  for (int g = 0; g < G; ++g) {
    for (int q = 0; q < kRows; ++q) c[g][q] = _mm256_setzero_ps();
  }
  for (int bi = 0; bi < kc / R::kBlock; ++bi) {
    const int i0 = bi * R::kBlock;
    auto step = [&]<int GG>() SPECCHAT_AVX2 {
      for (int q = 0; q < kRows; ++q) {
        __m256 u[4];
        w.template group<GG>(q, bi, u);
        for (int g = 0; g < G; ++g) {
          for (int i = 0; i < 4; ++i) {
            c[g][q] = _mm256_fmadd_ps(_mm256_loadu_ps(xr[g] + i0 + 32 * GG + 8 * i), u[i], c[g][q]);
          }
        }
      }
    };
    (step.template operator()<GI>(), ...);
  }
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < nr; ++q) {
      const float sum = hsum(c[g][q]);
      out[q] = k0 == 0 ? sum : out[q] + sum;
    }
  }
}

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on its `__m512 __Y = __Y;` idiom
// (GCC bug 105593, fixed in GCC 13): silenced for the AVX-512 functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The AVX-512 sources: group<GI>(q, bi, u) = values 32·GI .. 32·GI + 31 of block bi of weight
// row q, as 2 vectors of 16 floats (the integer steps of the AVX2 sources above, then the same
// scale products).
SPECCHAT_AVX512 inline void widen32x16(__m256i v, bool u8, __m512 out[2]) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  out[0] = _mm512_cvtepi32_ps(u8 ? _mm512_cvtepu8_epi32(lo) : _mm512_cvtepi8_epi32(lo));
  out[1] = _mm512_cvtepi32_ps(u8 ? _mm512_cvtepu8_epi32(hi) : _mm512_cvtepi8_epi32(hi));
}

struct Q8_0Rows {
  static constexpr int kBlock = 32;
  const BlockQ8_0* b[kRows];
  template <int GI>
  SPECCHAT_AVX512 void group(int q, int bi, __m512 u[2]) const {
    const BlockQ8_0& k = b[q][bi];
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(k.d));
    widen32x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(k.qs)), false, u);
    u[0] = _mm512_mul_ps(d, u[0]);
    u[1] = _mm512_mul_ps(d, u[1]);
  }
};

struct Q4_0Rows {
  static constexpr int kBlock = 32;
  const BlockQ4_0* b[kRows];
  template <int GI>
  SPECCHAT_AVX512 void group(int q, int bi, __m512 u[2]) const {
    const BlockQ4_0& k = b[q][bi];
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(k.d));
    widen32x16(q4_0_values(k), false, u);
    u[0] = _mm512_mul_ps(d, u[0]);
    u[1] = _mm512_mul_ps(d, u[1]);
  }
};

template <bool Q5, typename Block>
struct QK45Rows {
  static constexpr int kBlock = 256;
  const Block* b[kRows];
  const ChunkScales* sc;
  template <int GI>
  SPECCHAT_AVX512 void group(int q, int bi, __m512 u[2]) const {
    const __m512 d1 = _mm512_set1_ps(sc->a[q][8 * bi + GI]), m1 = _mm512_set1_ps(sc->m[q][8 * bi + GI]);
    const __m256i v = k45_values<Q5>(b[q][bi], GI);
    const __m512i i0 = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(v));
    const __m512i i1 = _mm512_cvtepu8_epi32(_mm256_extracti128_si256(v, 1));
    if constexpr (Q5) {
      u[0] = _mm512_fmsub_ps(d1, _mm512_cvtepi32_ps(i0), m1);
      u[1] = _mm512_fmsub_ps(d1, _mm512_cvtepi32_ps(i1), m1);
    } else {
      // 4-bit values: the 16 possible results fmsub(d·sc, v, dmin·m), v = 0..15, in one
      // register (the same fmsub per value, so the same bits), picked by a permute.
      const __m512 table =
          _mm512_fmsub_ps(d1, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), m1);
      u[0] = _mm512_permutexvar_ps(i0, table);
      u[1] = _mm512_permutexvar_ps(i1, table);
    }
  }
  SPECCHAT_AVX512 void fill(ChunkScales& out, int kc) const {
    QK45Rows8<Q5, Block>{{b[0], b[1], b[2], b[3]}, sc}.fill(out, kc);
  }
};

struct Q6KRows {
  static constexpr int kBlock = 256;
  const BlockQ6K* b[kRows];
  const ChunkScales* sc;
  template <int GI>
  SPECCHAT_AVX512 void group(int q, int bi, __m512 u[2]) const {
    widen32x16(q6_values(b[q][bi], GI), false, u);
    u[0] = _mm512_mul_ps(_mm512_set1_ps(sc->a[q][16 * bi + 2 * GI]), u[0]);
    u[1] = _mm512_mul_ps(_mm512_set1_ps(sc->a[q][16 * bi + 2 * GI + 1]), u[1]);
  }
  SPECCHAT_AVX512 void fill(ChunkScales& out, int kc) const { Q6KRows8{{b[0], b[1], b[2], b[3]}, sc}.fill(out, kc); }
};

// Rows [tk, tk + G) of x against one chunk of block-type weights dequantized in registers: per
// accumulator the operations of rows_avx512 (16-lane FMAs in column order, the same reduction),
// so the bits are the tile path's. One 32-value group of one weight row at a time.
template <int G, class R, int... GI>
SPECCHAT_AVX512 void rows_direct_avx512(const R& w, const float* x, float* y, int tk, int n_in, int n_out, int j0,
                                        int nr, int k0, int kc, std::integer_sequence<int, GI...>) {
  const float* xr[G];
  for (int g = 0; g < G; ++g) xr[g] = x + static_cast<int64_t>(tk + g) * n_in + k0;
  __m512 c[G][kRows];
  for (int g = 0; g < G; ++g) {
    for (int q = 0; q < kRows; ++q) c[g][q] = _mm512_setzero_ps();
  }
  for (int bi = 0; bi < kc / R::kBlock; ++bi) {
    const int i0 = bi * R::kBlock;
    auto step = [&]<int GG>() SPECCHAT_AVX512 {
      for (int q = 0; q < kRows; ++q) {
        __m512 u[2];
        w.template group<GG>(q, bi, u);
        for (int g = 0; g < G; ++g) {
          c[g][q] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[g] + i0 + 32 * GG), u[0], c[g][q]);
          c[g][q] = _mm512_fmadd_ps(_mm512_loadu_ps(xr[g] + i0 + 32 * GG + 16), u[1], c[g][q]);
        }
      }
    };
    (step.template operator()<GI>(), ...);
  }
  for (int g = 0; g < G; ++g) {
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < nr; ++q) {
      const float sum = _mm512_reduce_add_ps(c[g][q]);
      out[q] = k0 == 0 ? sum : out[q] + sum;
    }
  }
}

// block_avx512 for block-type weights and few rows of x: per chunk, the 4 weight rows'
// first blocks (a short block repeating its last row) and their scales, then chunk_avx512 with
// the weights dequantized in registers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Per chunk of kChunk columns: the 4 weight rows' first blocks (a short block repeating its last
// row) and their per-sub-block scales, then run(rows, k0, kc).
template <class R, class F>
void each_chunk(const void* w, DType t, int n_in, int j0, int nr, F&& run) {
  ChunkScales scales;
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    R rows{};
    for (int q = 0; q < kRows; ++q) {
      using B = std::remove_const_t<std::remove_pointer_t<std::remove_reference_t<decltype(rows.b[0])>>>;
      rows.b[q] = static_cast<const B*>(block_at(w, t, static_cast<int64_t>(j0 + std::min(q, nr - 1)) * n_in + k0));
    }
    if constexpr (requires { rows.sc; }) {
      rows.sc = &scales;
      rows.fill(scales, kc);
    }
    run(rows, k0, kc);
  }
}

// Every row of x, two at a time (the tile path's pairs, then the odd last row).
template <class R>
void direct_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out, int j0,
                 int nr) {
  each_chunk<R>(w, t, n_in, j0, nr, [&](const R& rows, int k0, int kc) {
    constexpr auto gs = std::make_integer_sequence<int, R::kBlock / 32>{};
    int tk = 0;
    for (; tk + 2 <= n_tokens; tk += 2) rows_direct_avx2<2>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, gs);
    if (tk < n_tokens) rows_direct_avx2<1>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, gs);
  });
}

// Every row of x: groups of 4, then a pair, then a single row (chunk_avx512's grouping).
template <class R>
void direct_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out, int j0,
                   int nr) {
  each_chunk<R>(w, t, n_in, j0, nr, [&](const R& rows, int k0, int kc) {
    constexpr auto gs = std::make_integer_sequence<int, R::kBlock / 32>{};
    int tk = 0;
    for (; tk + 4 <= n_tokens; tk += 4) rows_direct_avx512<4>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, gs);
    if (tk + 2 <= n_tokens) {
      rows_direct_avx512<2>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, gs);
      tk += 2;
    }
    if (tk < n_tokens) rows_direct_avx512<1>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, gs);
  });
}

}  // namespace

bool blocks_direct_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                        int j0, int nr) {
  switch (t) {
    case DType::q8_0: direct_avx2<Q8_0Rows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q4_0: direct_avx2<Q4_0Rows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q4_k: direct_avx2<QK45Rows8<false, BlockQ4K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q5_k: direct_avx2<QK45Rows8<true, BlockQ5K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q6_k: direct_avx2<Q6KRows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    default: return false;
  }
}

bool blocks_direct_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                          int j0, int nr) {
  switch (t) {
    case DType::q8_0: direct_avx512<Q8_0Rows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q4_0: direct_avx512<Q4_0Rows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q4_k: direct_avx512<QK45Rows<false, BlockQ4K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q5_k: direct_avx512<QK45Rows<true, BlockQ5K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    case DType::q6_k: direct_avx512<Q6KRows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return true;
    default: return false;
  }
}

#endif

}  // namespace specchat::cpu::tiling
