#include "kernels/cpu/linear.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequant_simd.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specchat::cpu {

namespace {

constexpr int kRows = 4;    // weight rows per block
constexpr int kChunk = 1024;  // columns per block: 4 × 1024 f32 = 16 KiB of tile, stays in L1
static_assert(kChunk % 256 == 0, "a chunk holds whole blocks of every block type");

// The bytes of block-type weights from element `off` (a multiple of the block size: rows are
// whole blocks and chunks start at multiples of kChunk).
const void* block_at(const void* w, DType t, int64_t off) {
  return static_cast<const uint8_t*>(w) + off / dtype_block_size(t) * static_cast<int64_t>(dtype_block_bytes(t));
}

// Portable widening of n weights starting at element `off` of a row.
void widen_generic(const void* w, DType t, int64_t off, float* dst, int n) {
  if (dtype_is_block(t)) {
    dequantize_row_ref(t, block_at(w, t, off), dst, n);
  } else if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
  } else {
    convert_to_f32(static_cast<const uint16_t*>(w) + off, t, dst, n);
  }
}

// One block (rows j0 .. j0 + nr − 1 of W, nr <= 4) for every row of x, portable version.
void block_generic(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                   int j0, int nr) {
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    for (int r = 0; r < nr; ++r) widen_generic(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    for (int tk = 0; tk < n_tokens; ++tk) {
      const float* xr = x + static_cast<int64_t>(tk) * n_in + k0;
      for (int r = 0; r < nr; ++r) {
        float lanes[8] = {};
        const int kc8 = kc / 8 * 8;
        for (int i = 0; i < kc8; i += 8) {
          for (int l = 0; l < 8; ++l) lanes[l] += xr[i + l] * tile[r][i + l];
        }
        float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        for (int i = kc8; i < kc; ++i) s += xr[i] * tile[r][i];
        float* out = y + static_cast<int64_t>(tk) * n_out + j0 + r;
        *out = k0 == 0 ? s : *out + s;
      }
    }
  }
}

#if defined(__x86_64__)
#define SPECCHAT_AVX2 __attribute__((target("avx2,fma,f16c")))

SPECCHAT_AVX2 inline float hsum(__m256 v) {
  // ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)): the generic path's order.
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  const __m128 s4 = _mm_add_ps(lo, hi);                        // [0+4, 1+5, 2+6, 3+7]
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));     // [(0+4)+(2+6), (1+5)+(3+7)]
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

SPECCHAT_AVX2 void widen_avx2(const void* w, DType t, int64_t off, float* dst, int n) {
  if (dtype_is_block(t)) {
    dequantize_row_avx2(t, block_at(w, t, off), dst, n);
    return;
  }
  if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(w) + off;
  const int n8 = n / 8 * 8;
  if (t == DType::f16) {
    for (int i = 0; i < n8; i += 8) {
      _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  } else {  // bf16: the upper half of an f32
    for (int i = 0; i < n8; i += 8) {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      _mm256_store_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
  }
  if (n8 < n) convert_to_f32(src + n8, t, dst + n8, n - n8);
}

// 8 16-bit weights widened to f32 in a register (exactly the values widen_avx2 stores).
SPECCHAT_AVX2 inline __m256 widen8(const uint16_t* p, bool f16) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return f16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// block_avx2 for one or two rows of x and F16/BF16 weights: the weights are widened in registers
// as they are used instead of through the L1 tile. Per output element the same operations in the same order as
// the tile path (8 lane sums over k by FMA, hsum, scalar tail FMAs), so results are bitwise the
// same and the kernel stays batch-invariant.
SPECCHAT_AVX2 void block_avx2_direct(const float* x, const uint16_t* w, bool f16, float* y, int n_tokens, int n_in,
                                     int n_out, int j0, int nr) {
  alignas(32) float tail[kRows][8];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    const int kc8 = kc / 8 * 8;
    const uint16_t* r[kRows];
    for (int q = 0; q < kRows; ++q) r[q] = w + static_cast<int64_t>(j0 + std::min(q, nr - 1)) * n_in + k0;
    if (kc8 < kc) {  // the last kc - kc8 weights of each row, widened once
      for (int q = 0; q < nr; ++q) convert_to_f32(r[q] + kc8, f16 ? DType::f16 : DType::bf16, tail[q], kc - kc8);
      for (int q = nr; q < kRows; ++q) std::memcpy(tail[q], tail[nr - 1], sizeof tail[q]);
    }
    auto store = [&](int tk, const float* sv) {
      float* out = y + static_cast<int64_t>(tk) * n_out + j0;
      for (int q = 0; q < nr; ++q) out[q] = k0 == 0 ? sv[q] : out[q] + sv[q];
    };
    const float* xa = x + k0;
    if (n_tokens == 2) {
      const float* xb = xa + n_in;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
        const __m256 u0 = widen8(r[0] + i, f16), u1 = widen8(r[1] + i, f16);
        const __m256 u2 = widen8(r[2] + i, f16), u3 = widen8(r[3] + i, f16);
        a0 = _mm256_fmadd_ps(va, u0, a0);
        a1 = _mm256_fmadd_ps(va, u1, a1);
        a2 = _mm256_fmadd_ps(va, u2, a2);
        a3 = _mm256_fmadd_ps(va, u3, a3);
        b0 = _mm256_fmadd_ps(vb, u0, b0);
        b1 = _mm256_fmadd_ps(vb, u1, b1);
        b2 = _mm256_fmadd_ps(vb, u2, b2);
        b3 = _mm256_fmadd_ps(vb, u3, b3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      float sb[4] = {hsum(b0), hsum(b1), hsum(b2), hsum(b3)};
      for (int i = kc8; i < kc; ++i) {
        for (int q = 0; q < kRows; ++q) {
          sa[q] = std::fma(xa[i], tail[q][i - kc8], sa[q]);
          sb[q] = std::fma(xb[i], tail[q][i - kc8], sb[q]);
        }
      }
      store(0, sa);
      store(1, sb);
    } else {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i);
        a0 = _mm256_fmadd_ps(va, widen8(r[0] + i, f16), a0);
        a1 = _mm256_fmadd_ps(va, widen8(r[1] + i, f16), a1);
        a2 = _mm256_fmadd_ps(va, widen8(r[2] + i, f16), a2);
        a3 = _mm256_fmadd_ps(va, widen8(r[3] + i, f16), a3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int i = kc8; i < kc; ++i) {
        for (int q = 0; q < kRows; ++q) sa[q] = std::fma(xa[i], tail[q][i - kc8], sa[q]);
      }
      store(0, sa);
    }
  }
}

// Block-type weights dequantized in registers as they are used: exactly the f32 values
// dequantize_row_avx2 writes into the tile (the same products, the same fused multiply-subtract),
// so both sources give the same bits. A chunk starts at a multiple of kChunk (whole 256-value
// super-blocks) and holds whole blocks, so kc is a multiple of 32 and there is no tail.
// b[q]: the chunk's first block of weight row q. Per-sub-block scales that need more than one
// operation are computed once per chunk (ChunkScales) instead of per 16 columns.
struct ChunkScales {
  alignas(64) float a[kRows][kChunk / 16];  // q4_K/q5_K: d·sc per 32 values; q6_K: d·scale per 16
  alignas(64) float m[kRows][kChunk / 32];  // q4_K/q5_K: dmin·m per 32 values
};

SPECCHAT_AVX2 inline __m256i load32b(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The 32 bytes of v as 8-bit integers (unsigned when U, else signed), in 4 vectors of 8 floats
// (as the dequantizer's widen32).
template <bool U>
SPECCHAT_AVX2 inline void widen32f(__m256i v, __m256 out[4]) {
  const __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
  for (int i = 0; i < 4; ++i) {
    out[i] = _mm256_cvtepi32_ps(U ? _mm256_cvtepu8_epi32(parts[i]) : _mm256_cvtepi8_epi32(parts[i]));
  }
}

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
    widen32f<false>(q4_0_values(k), u);
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
    widen32f<true>(k45_values<Q5>(b[q][bi], GI), u);
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
    widen32f<false>(q6_values(b[q][bi], GI), u);
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

template <class R>
SPECCHAT_AVX2 void block_direct_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                                     int n_out, int j0, int nr) {
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
    constexpr auto js = std::make_integer_sequence<int, R::kBlock / 32>{};
    int tk = 0;
    for (; tk + 2 <= n_tokens; tk += 2) rows_direct_avx2<2>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, js);
    if (tk < n_tokens) rows_direct_avx2<1>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, js);
  }
}

// Batches of up to this many rows dequantize block-type weights in registers; larger ones
// dequantize each chunk once into the L1 tile and reuse it (the dequantization costs more than
// the tile's stores and reloads once it is repeated for every group of rows). Measured on this
// Zen 4 EPYC, one thread, 2048 x 2048 (scripts/bench-linear.cpp), µs for 1 / 4 rows, tile ->
// registers: AVX-512 q8_0 272 -> 154 / 377 -> 238, q4_K 337 -> 243 / 435 -> 345, q6_K
// 398 -> 290 / 493 -> 411; AVX2 q8_0 340 -> 217, q4_K 415 -> 341, q6_K 470 -> 415 at one row,
// but at 4 rows AVX2's 16 registers make the register path slower (q6_K 768 -> 897): 2 there.
constexpr int kDirectMaxBlockRowsAvx512 = 4;
constexpr int kDirectMaxBlockRowsAvx2 = 2;

SPECCHAT_AVX2 void block_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                              int n_out, int j0, int nr) {
  if (t == DType::f16 || t == DType::bf16) {
    // 16-bit weights: two rows of x at a time, the weights re-widened in registers for each pair.
    // Measured faster than widening once into the L1 tile at every batch size (this VM's AMD
    // EPYC, one thread, 864 x 320 F16: 1 row 37.5 -> 16.9 us, 4 rows 57 -> 33, 8 rows 90 -> 61,
    // 32 rows 272 -> 234): the tile's stores and reloads cost more than re-widening. Block
    // (quantized) types keep the tile: their dequantization is far dearer than F16C.
    for (int tk = 0; tk < n_tokens; tk += 2) {
      block_avx2_direct(x + static_cast<int64_t>(tk) * n_in, static_cast<const uint16_t*>(w), t == DType::f16,
                        y + static_cast<int64_t>(tk) * n_out, std::min(2, n_tokens - tk), n_in, n_out, j0, nr);
    }
    return;
  }
  if (dtype_is_block(t) && n_tokens <= kDirectMaxBlockRowsAvx2) {
    switch (t) {
      case DType::q8_0: block_direct_avx2<Q8_0Rows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q4_0: block_direct_avx2<Q4_0Rows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q4_k: block_direct_avx2<QK45Rows8<false, BlockQ4K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q5_k: block_direct_avx2<QK45Rows8<true, BlockQ5K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q6_k: block_direct_avx2<Q6KRows8>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      default: break;
    }
  }
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    const int kc8 = kc / 8 * 8;
    for (int r = 0; r < nr; ++r) widen_avx2(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    // A short block repeats its last row (computed, not stored) so the loop stays 4 wide.
    const float* w0 = tile[0];
    const float* w1 = tile[std::min(1, nr - 1)];
    const float* w2 = tile[std::min(2, nr - 1)];
    const float* w3 = tile[std::min(3, nr - 1)];
    auto store = [&](int tk, const float* s) {
      float* out = y + static_cast<int64_t>(tk) * n_out + j0;
      for (int r = 0; r < nr; ++r) out[r] = k0 == 0 ? s[r] : out[r] + s[r];
    };
    int tk = 0;
    for (; tk + 2 <= n_tokens; tk += 2) {
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      const float* xb = xa + n_in;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
        const __m256 u0 = _mm256_load_ps(w0 + i), u1 = _mm256_load_ps(w1 + i);
        const __m256 u2 = _mm256_load_ps(w2 + i), u3 = _mm256_load_ps(w3 + i);
        a0 = _mm256_fmadd_ps(va, u0, a0);
        a1 = _mm256_fmadd_ps(va, u1, a1);
        a2 = _mm256_fmadd_ps(va, u2, a2);
        a3 = _mm256_fmadd_ps(va, u3, a3);
        b0 = _mm256_fmadd_ps(vb, u0, b0);
        b1 = _mm256_fmadd_ps(vb, u1, b1);
        b2 = _mm256_fmadd_ps(vb, u2, b2);
        b3 = _mm256_fmadd_ps(vb, u3, b3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      float sb[4] = {hsum(b0), hsum(b1), hsum(b2), hsum(b3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
        sb[0] = std::fma(xb[i], w0[i], sb[0]);
        sb[1] = std::fma(xb[i], w1[i], sb[1]);
        sb[2] = std::fma(xb[i], w2[i], sb[2]);
        sb[3] = std::fma(xb[i], w3[i], sb[3]);
      }
      store(tk, sa);
      store(tk + 1, sb);
    }
    if (tk < n_tokens) {  // the odd last row: same operations per element as the pairs
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i);
        a0 = _mm256_fmadd_ps(va, _mm256_load_ps(w0 + i), a0);
        a1 = _mm256_fmadd_ps(va, _mm256_load_ps(w1 + i), a1);
        a2 = _mm256_fmadd_ps(va, _mm256_load_ps(w2 + i), a2);
        a3 = _mm256_fmadd_ps(va, _mm256_load_ps(w3 + i), a3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
      }
      store(tk, sa);
    }
  }
}

#define SPECCHAT_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on its `__m512 __Y = __Y;` idiom
// (GCC bug 105593, fixed in GCC 13): silenced for the AVX-512 functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

SPECCHAT_AVX512 void widen_avx512(const void* w, DType t, int64_t off, float* dst, int n) {
  if (dtype_is_block(t)) {  // the 8-lane dequantizer: the tile, not the dequantization, is the hot loop
    dequantize_row_avx2(t, block_at(w, t, off), dst, n);
    return;
  }
  if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(w) + off;
  const int n16 = n / 16 * 16;
  if (t == DType::f16) {
    for (int i = 0; i < n16; i += 16) {
      _mm512_store_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    }
  } else {
    for (int i = 0; i < n16; i += 16) {
      const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
      _mm512_store_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
  }
  if (n16 < n) convert_to_f32(src + n16, t, dst + n16, n - n16);
}

// Batches of up to this many rows widen 16-bit weights in registers (RegisterRows); larger
// ones widen each chunk once into the L1 tile (TileRows) and reuse it for every group of rows.
// Measured on a Zen 4 EPYC (one thread, F16, scripts/bench-linear.cpp): n_in 864 → 320 at
// 1 / 4 / 8 rows 10.9 → 6.8, 16.3 → 11.7, 26.3 → 22.4 µs; at 32 rows the tile stays ahead.
// Both give the same bits.
constexpr int kDirectMaxRows = 8;

// The weights of one chunk of a block (4 rows, a short block repeating its last row) as the
// chunk kernel reads them: 16 of row q from column i (i < kc16), and the scalar tail.
struct TileRows {  // widened once into the L1 tile
  const float* wr[kRows];
  SPECCHAT_AVX512 __m512 operator()(int q, int i) const { return _mm512_load_ps(wr[q] + i); }
  float tail(int q, int i) const { return wr[q][i]; }
};
struct RegisterRows {  // 16-bit weights widened in registers as they are used
  const uint16_t* r[kRows];
  bool f16;
  const float (*tail_)[16];  // [kRows][16]: columns kc16 … kc − 1, widened once
  int kc16;
  SPECCHAT_AVX512 __m512 operator()(int q, int i) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r[q] + i));
    return f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  float tail(int q, int i) const { return tail_[q][i - kc16]; }
};

// Rows [tk, tk + G) of x against one chunk [k0, k0 + kc) of a block: G × 4 accumulators of 16
// lanes, FMAs in column order, _mm512_reduce_add_ps, then scalar FMAs over the tail. Every row
// gets the same operations per element whatever G and whatever the weight source: the kernel
// is batch-invariant and both sources give the same bits.
template <int G, class W>
SPECCHAT_AVX512 void rows_avx512(const W& w, const float* x, float* y, int tk, int n_in, int n_out, int j0, int nr,
                                 int k0, int kc) {
  const int kc16 = kc / 16 * 16;
  const float* xr[G];
  for (int g = 0; g < G; ++g) xr[g] = x + static_cast<int64_t>(tk + g) * n_in + k0;
  __m512 c[G][kRows];
  for (int g = 0; g < G; ++g) {
    for (int q = 0; q < kRows; ++q) c[g][q] = _mm512_setzero_ps();
  }
  for (int i = 0; i < kc16; i += 16) {
    const __m512 u0 = w(0, i), u1 = w(1, i), u2 = w(2, i), u3 = w(3, i);
    for (int g = 0; g < G; ++g) {
      const __m512 v = _mm512_loadu_ps(xr[g] + i);
      c[g][0] = _mm512_fmadd_ps(v, u0, c[g][0]);
      c[g][1] = _mm512_fmadd_ps(v, u1, c[g][1]);
      c[g][2] = _mm512_fmadd_ps(v, u2, c[g][2]);
      c[g][3] = _mm512_fmadd_ps(v, u3, c[g][3]);
    }
  }
  for (int g = 0; g < G; ++g) {
    float sum[kRows];
    for (int q = 0; q < kRows; ++q) sum[q] = _mm512_reduce_add_ps(c[g][q]);
    for (int i = kc16; i < kc; ++i) {
      for (int q = 0; q < kRows; ++q) sum[q] = std::fma(xr[g][i], w.tail(q, i), sum[q]);
    }
    float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
    for (int q = 0; q < nr; ++q) out[q] = k0 == 0 ? sum[q] : out[q] + sum[q];
  }
}

// Every row of x against one chunk: groups of 4 rows, then a pair, then a single row.
template <class W>
SPECCHAT_AVX512 void chunk_avx512(const W& w, const float* x, float* y, int n_tokens, int n_in, int n_out, int j0,
                                  int nr, int k0, int kc) {
  int tk = 0;
  for (; tk + 4 <= n_tokens; tk += 4) rows_avx512<4>(w, x, y, tk, n_in, n_out, j0, nr, k0, kc);
  if (tk + 2 <= n_tokens) {
    rows_avx512<2>(w, x, y, tk, n_in, n_out, j0, nr, k0, kc);
    tk += 2;
  }
  if (tk < n_tokens) rows_avx512<1>(w, x, y, tk, n_in, n_out, j0, nr, k0, kc);
}

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
    widen32x16(k45_values<Q5>(b[q][bi], GI), true, u);
    const __m512 d1 = _mm512_set1_ps(sc->a[q][8 * bi + GI]), m1 = _mm512_set1_ps(sc->m[q][8 * bi + GI]);
    u[0] = _mm512_fmsub_ps(d1, u[0], m1);
    u[1] = _mm512_fmsub_ps(d1, u[1], m1);
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
template <class R>
SPECCHAT_AVX512 void block_direct_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                                         int n_out, int j0, int nr) {
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
    constexpr auto js = std::make_integer_sequence<int, R::kBlock / 32>{};
    int tk = 0;
    for (; tk + 4 <= n_tokens; tk += 4) rows_direct_avx512<4>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, js);
    if (tk + 2 <= n_tokens) {
      rows_direct_avx512<2>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, js);
      tk += 2;
    }
    if (tk < n_tokens) rows_direct_avx512<1>(rows, x, y, tk, n_in, n_out, j0, nr, k0, kc, js);
  }
}

// AVX-512 twin of block_avx2: 16 lanes and 32 registers, so up to 4 rows of x × 4 weight rows
// (16 accumulators) per pass over a chunk; batch-invariant like the AVX2 kernel.
SPECCHAT_AVX512 void block_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                                  int n_out, int j0, int nr) {
  const bool half = t == DType::f16 || t == DType::bf16;
  if (dtype_is_block(t) && n_tokens <= kDirectMaxBlockRowsAvx512) {
    switch (t) {
      case DType::q8_0: block_direct_avx512<Q8_0Rows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q4_0: block_direct_avx512<Q4_0Rows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q4_k: block_direct_avx512<QK45Rows<false, BlockQ4K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q5_k: block_direct_avx512<QK45Rows<true, BlockQ5K>>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      case DType::q6_k: block_direct_avx512<Q6KRows>(x, w, t, y, n_tokens, n_in, n_out, j0, nr); return;
      default: break;
    }
  }
  if (half && n_tokens <= kDirectMaxRows) {
    alignas(64) float tail[kRows][16];
    for (int k0 = 0; k0 < n_in; k0 += kChunk) {
      const int kc = std::min(kChunk, n_in - k0);
      RegisterRows rows{{}, t == DType::f16, tail, kc / 16 * 16};
      for (int q = 0; q < kRows; ++q) {
        rows.r[q] = static_cast<const uint16_t*>(w) + static_cast<int64_t>(j0 + std::min(q, nr - 1)) * n_in + k0;
      }
      if (rows.kc16 < kc) {  // the last kc − kc16 weights of each row, widened once
        for (int q = 0; q < nr; ++q) convert_to_f32(rows.r[q] + rows.kc16, t, tail[q], kc - rows.kc16);
        for (int q = nr; q < kRows; ++q) std::memcpy(tail[q], tail[nr - 1], sizeof tail[q]);
      }
      chunk_avx512(rows, x, y, n_tokens, n_in, n_out, j0, nr, k0, kc);
    }
    return;
  }
  alignas(64) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    for (int r = 0; r < nr; ++r) widen_avx512(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    const TileRows rows{{tile[0], tile[std::min(1, nr - 1)], tile[std::min(2, nr - 1)], tile[std::min(3, nr - 1)]}};
    chunk_avx512(rows, x, y, n_tokens, n_in, n_out, j0, nr, k0, kc);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool have_avx512() { return cpu_has_avx512_fma_f16c(); }

bool have_avx2() { return cpu_has_avx2_fma_f16c(); }
#else
bool have_avx2() { return false; }
bool have_avx512() { return false; }
#endif

}  // namespace

const char* linear_isa() { return have_avx512() ? "avx512f" : have_avx2() ? "avx2+fma+f16c" : "generic"; }

namespace {

// Blocks [b0, b1) of one job (4 weight rows each) on this thread.
void run_blocks(const LinearJob& jb, int b0, int b1) {
  const bool avx512 = have_avx512();
  const bool avx2 = have_avx2();
  for (int b = b0; b < b1; ++b) {
    const int j0 = b * kRows, nr = std::min(kRows, jb.n_out - j0);
#if defined(__x86_64__)
    if (avx512) {
      block_avx512(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
      continue;
    }
    if (avx2) {
      block_avx2(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
      continue;
    }
#endif
    block_generic(jb.x, jb.w, jb.w_type, jb.y, jb.n_tokens, jb.n_in, jb.n_out, j0, nr);
  }
}

}  // namespace

bool linear_isa_supported(LinearIsa isa) {
  switch (isa) {
    case LinearIsa::generic: return true;
    case LinearIsa::avx2: return have_avx2();
    case LinearIsa::avx512: return have_avx512();
  }
  return false;
}

void linear_with_isa(LinearIsa isa, const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in,
                     int n_out) {
  if (w_type == DType::f32) throw std::invalid_argument("linear_with_isa: 16-bit or block weights only");
  if (!linear_isa_supported(isa)) throw std::invalid_argument("linear_with_isa: this CPU lacks that variant");
  for (int j0 = 0; j0 < n_out; j0 += kRows) {
    const int nr = std::min(kRows, n_out - j0);
#if defined(__x86_64__)
    if (isa == LinearIsa::avx512) {
      block_avx512(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
      continue;
    }
    if (isa == LinearIsa::avx2) {
      block_avx2(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
      continue;
    }
#endif
    block_generic(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
  }
}

namespace {

int n_blocks_of(const LinearJob& jb) { return jb.n_tokens > 0 ? (jb.n_out + kRows - 1) / kRows : 0; }

}  // namespace

void linear(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
            ThreadPool* pool) {
  const LinearJob jb{x, w, w_type, y, n_tokens, n_in, n_out};
  linear_multi(std::span<const LinearJob>(&jb, 1), pool);
}

void linear_multi(std::span<const LinearJob> jobs, ThreadPool* pool) {
  for (const LinearJob& jb : jobs) {
    if (dtype_is_block(jb.w_type) && jb.n_in % dtype_block_size(jb.w_type) != 0) {
      throw std::invalid_argument(std::string("linear: rows of ") + std::to_string(jb.n_in) + " " +
                                  dtype_name(jb.w_type) + " weights are not whole blocks");
    }
  }
  // F32 weights take cpu::matmul (its own kernel or OpenBLAS), one job at a time.
  bool all16 = true;
  for (const LinearJob& jb : jobs) all16 = all16 && jb.w_type != DType::f32;
  if (!all16) {
    for (const LinearJob& jb : jobs) {
      if (jb.w_type == DType::f32) {
        matmul(jb.x, static_cast<const float*>(jb.w), jb.y, jb.n_tokens, jb.n_in, jb.n_out, pool);
      } else {
        linear_multi(std::span<const LinearJob>(&jb, 1), pool);
      }
    }
    return;
  }
  int total = 0;
  int64_t work = 0;
  for (const LinearJob& jb : jobs) {
    total += n_blocks_of(jb);
    work += static_cast<int64_t>(jb.n_out) * jb.n_in * std::max(0, jb.n_tokens);
  }
  // Global blocks [g0, g1) across the jobs, in order.
  auto run = [&](int g0, int g1) {
    int base = 0;
    for (const LinearJob& jb : jobs) {
      const int nb = n_blocks_of(jb);
      const int b0 = std::max(g0 - base, 0), b1 = std::min(g1 - base, nb);
      if (b0 < b1) run_blocks(jb, b0, b1);
      base += nb;
      if (base >= g1) break;
    }
  };
  // Threads only pay off when there is enough work to split (below ~64k multiply-adds a
  // region's wake-up costs more than it saves). Several chunks per thread, so a thread that
  // the OS deschedules holds up only its chunk.
  const int n_threads = pool ? pool->n_threads() : 1;
  if (n_threads <= 1 || work < (1 << 16)) {
    run(0, total);
    return;
  }
  const int n_chunks = std::min(total, 8 * n_threads);
  parallel_for(pool, n_chunks, [&](int c) {
    run(static_cast<int>(static_cast<int64_t>(total) * c / n_chunks),
        static_cast<int>(static_cast<int64_t>(total) * (c + 1) / n_chunks));
  });
}

void linear_ref(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out) {
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int j = 0; j < n_out; ++j) {
    widen_generic(w, w_type, static_cast<int64_t>(j) * n_in, row.data(), n_in);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<int64_t>(t) * n_in;
      double s = 0;
      for (int i = 0; i < n_in; ++i) s += static_cast<double>(xr[i]) * row[static_cast<size_t>(i)];
      y[static_cast<int64_t>(t) * n_out + j] = static_cast<float>(s);
    }
  }
}

}  // namespace specchat::cpu
