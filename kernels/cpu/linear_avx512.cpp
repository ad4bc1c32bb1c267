// The AVX-512 paths of cpu::linear's f32 kernel (linear.h) for 16-bit weights, and the tile
// path every weight type falls back to: block_avx512 (declared in linear_tiling.h). Split from
// linear.cpp, which dispatches to it.
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear_tiling.h"

namespace specchat::cpu::tiling {

namespace {

// GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized on its `__m512 __Y = __Y;` idiom
// (GCC bug 105593, fixed in GCC 13): silenced for the AVX-512 functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

SPECCHAT_AVX512 void widen_avx512(const void* w, DType t, int64_t off, float* dst, int n) {
  if (widen_block_or_f32(w, t, off, dst, n)) return;
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
// Both give the same bits. Measured on a Zen 4 EPYC (one thread, F16, warm caches,
// scripts/bench-linear.cpp): n_in 864 → 320 at 1 / 4 / 8 rows 10.9 → 6.8, 16.3 → 11.7,
// 26.3 → 22.4 µs. On Zen 5 with the weights coming from memory, as in a forward (the bundled
// target's matmuls in sequence, two threads), the tile's widening, which has no prefetch, lost
// at 16 and 32 rows: 1121-1197 → 882-941 µs and 2014-2157 → 1725-1832 µs (limit 8 → 32); at
// 48 and 64 rows the two were level (docs/perf/cpu.md, 2026-12-05).
constexpr int kDirectMaxRows = 32;

// The weights of one chunk of a block (4 rows, a short block repeating its last row) as the
// chunk kernel reads them: 16 of row q from column i (i < kc16), and the scalar tail.
struct TileRows {  // widened once into the L1 tile
  const float* wr[kRows];
  SPECCHAT_AVX512 __m512 operator()(int q, int i) const { return _mm512_load_ps(wr[q] + i); }
  float tail(int q, int i) const { return wr[q][i]; }
  void prefetch(int) const {}
};
struct RegisterRows {  // 16-bit weights widened in registers as they are used
  const uint16_t* r[kRows];
  bool f16;
  const float (*tail_)[16];  // [kRows][16]: columns kc16 … kc − 1, widened once
  int kc16;
  SPECCHAT_AVX512 __m512 operator()(int q, int i) const { return widen(r[q] + i); }
  SPECCHAT_AVX512 __m512 widen(const uint16_t* p) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return f16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  float tail(int q, int i) const { return tail_[q][i - kc16]; }
  // The bytes kPrefetchHalf values (16 KiB) ahead in each row, one line per call (i a multiple
  // of 32): a core busy widening and multiplying issues its loads too slowly to keep DRAM busy
  // (measured: 2048 x 65536 F16, two threads, 40-42 -> 57-65 GB/s).
  void prefetch(int i) const {
    for (int q = 0; q < kRows; ++q) _mm_prefetch(reinterpret_cast<const char*>(r[q] + i + kPrefetchHalf), _MM_HINT_T0);
  }
  static constexpr int kPrefetchHalf = 8192;
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
    if ((i & 31) == 0) w.prefetch(i);
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

// 16 16-bit weights widened to f32 (F16 or BF16).
template <bool F16>
SPECCHAT_AVX512 inline __m512 widen16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Four _mm512_reduce_add_ps at once, with the same additions in the same order (GCC's: lane i
// + lane i + 8, then + 4, then + 2, then + 1; a + b and b + a are the same bits, except which
// payload survives when two different NaNs meet), so the same bits: lanes 0 … 3 of the result
// are the sums of a, b, c and d. 14 shuffles and adds against 28.
SPECCHAT_AVX512 inline __m128 reduce_add4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // [a₀₋₇ + a₈₋₁₅, b₀₋₇ + b₈₋₁₅] and the same for c, d.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  // One 128-bit lane per input: its first four partial sums + its next four.
  const __m512 s4 = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 s2 = _mm512_add_ps(s4, _mm512_permute_ps(s4, 0x4E));  // lanes (2, 3, 0, 1)
  const __m512 s1 = _mm512_add_ps(s2, _mm512_permute_ps(s2, 0xB1));  // lanes (1, 0, 3, 2)
  const __m512i firsts = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(firsts, s1));
}

// Rows [tk, tk + G) of x against one block of 16-bit weights, n_in a multiple of 16:
// chunk_avx512's operations with RegisterRows (FMAs in column order into one accumulator per
// row pair, _mm512_reduce_add_ps per chunk, chunk sums added into y in chunk order), so the same
// bits, without its per-block bookkeeping. Weight rows are offsets from the first, kept in scalar
// registers (as an array of row pointers the loop ran 1.4-1.7x slower). One thread, F16, 1 row,
// µs: 4096 x 128 (the bundled draft's LM head) 33 -> 19, 1728 x 320 21.4 -> 15.0, 320 x 864
// 7.0 -> 6.0 (scripts/bench-linear.cpp, 2026-12-05).
template <bool F16, int G>
SPECCHAT_AVX512 void rows_avx512_half(const float* x, const uint16_t* w, float* y, int tk, int n_in, int n_out, int j0,
                                      int nr) {
  const uint16_t* r = w + static_cast<int64_t>(j0) * n_in;
  const int64_t o1 = static_cast<int64_t>(std::min(1, nr - 1)) * n_in, o2 = static_cast<int64_t>(std::min(2, nr - 1)) * n_in,
                o3 = static_cast<int64_t>(std::min(3, nr - 1)) * n_in;
  const float* xr = x + static_cast<int64_t>(tk) * n_in;
  constexpr int kAhead = RegisterRows::kPrefetchHalf;
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int k1 = std::min(n_in, k0 + kChunk);
    __m512 c[G][kRows];
    for (int g = 0; g < G; ++g) {
      for (int q = 0; q < kRows; ++q) c[g][q] = _mm512_setzero_ps();
    }
    for (int i = k0; i < k1; i += 16) {
      if (((i - k0) & 31) == 0) {  // RegisterRows::prefetch
        _mm_prefetch(reinterpret_cast<const char*>(r + i + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(r + o1 + i + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(r + o2 + i + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(r + o3 + i + kAhead), _MM_HINT_T0);
      }
      const __m512 u0 = widen16<F16>(r + i), u1 = widen16<F16>(r + o1 + i), u2 = widen16<F16>(r + o2 + i),
                   u3 = widen16<F16>(r + o3 + i);
      for (int g = 0; g < G; ++g) {
        const __m512 v = _mm512_loadu_ps(xr + static_cast<int64_t>(g) * n_in + i);
        c[g][0] = _mm512_fmadd_ps(v, u0, c[g][0]);
        c[g][1] = _mm512_fmadd_ps(v, u1, c[g][1]);
        c[g][2] = _mm512_fmadd_ps(v, u2, c[g][2]);
        c[g][3] = _mm512_fmadd_ps(v, u3, c[g][3]);
      }
    }
    for (int g = 0; g < G; ++g) {
      float* out = y + static_cast<int64_t>(tk + g) * n_out + j0;
      const __m128 s = reduce_add4(c[g][0], c[g][1], c[g][2], c[g][3]);
      if (k0 == 0 && nr == kRows) {
        _mm_storeu_ps(out, s);
      } else {
        alignas(16) float sv[kRows];
        _mm_store_ps(sv, s);
        for (int q = 0; q < nr; ++q) out[q] = k0 == 0 ? sv[q] : out[q] + sv[q];
      }
    }
  }
}

// Every row of x (up to kDirectMaxRows) against one block of 16-bit weights, n_in a multiple of 16.
template <bool F16>
SPECCHAT_AVX512 void block_avx512_half(const float* x, const uint16_t* w, float* y, int n_tokens, int n_in, int n_out,
                                       int j0, int nr) {
  int tk = 0;
  for (; tk + 4 <= n_tokens; tk += 4) rows_avx512_half<F16, 4>(x, w, y, tk, n_in, n_out, j0, nr);
  if (tk + 2 <= n_tokens) {
    rows_avx512_half<F16, 2>(x, w, y, tk, n_in, n_out, j0, nr);
    tk += 2;
  }
  if (tk < n_tokens) rows_avx512_half<F16, 1>(x, w, y, tk, n_in, n_out, j0, nr);
}

}  // namespace

SPECCHAT_AVX512 void block_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                                  int n_out, int j0, int nr) {
  const bool half = t == DType::f16 || t == DType::bf16;
  if (dtype_is_block(t) && n_tokens <= kDirectMaxBlockRowsAvx512 &&
      blocks_direct_avx512(x, w, t, y, n_tokens, n_in, n_out, j0, nr)) {
    return;
  }
  if (half && n_tokens <= kDirectMaxRows && n_in % 16 == 0) {
    if (t == DType::f16) {
      block_avx512_half<true>(x, static_cast<const uint16_t*>(w), y, n_tokens, n_in, n_out, j0, nr);
    } else {
      block_avx512_half<false>(x, static_cast<const uint16_t*>(w), y, n_tokens, n_in, n_out, j0, nr);
    }
    return;
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

}  // namespace specchat::cpu::tiling

#endif  // __x86_64__
