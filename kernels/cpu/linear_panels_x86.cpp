// The AVX-512 and AVX2 variants of linear_panels (linear_panels.h): rows × panels of
// accumulators in registers, each step of k one widened 16-value weight vector per panel and one
// broadcast x[t, k] per row, fused multiply-add in k order (the chain linear_panels.h states).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/linear_panels_impl.h"
#include "kernels/cpu/linear_tiling.h"

namespace specchat::cpu::panels {

namespace {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's avx512fintrin.h (bug 105593)
#endif

// Prefetch distance in steps of k (32 bytes of a panel each): 4 KiB ahead in each panel stream
// (one-row products with the weights streaming from memory: 1 KiB left them 20 % slower than
// the row-major kernel, 4 KiB level with it; 320 → 1728 and 864 → 320, 2 threads).
constexpr int kPrefetchK = 128;
// Prefetching past a panel's end reads nothing (a hint never faults).
inline void prefetch(const uint16_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// The line to prefetch for panel p of a pass of P panels at step k: kPrefetchK steps ahead in
// the same panel, or, past its end, that far into panel p of the next pass (the next P panels,
// which the same thread usually runs next): so the head of every next panel is on its way, not
// only the first's, as when each stream ran on into its neighbour.
inline const uint16_t* ahead(const uint16_t* w, size_t ps, int P, int p, int k, int n_in) {
  const int ka = k + kPrefetchK;
  if (ka < n_in) return w + static_cast<size_t>(p) * ps + static_cast<size_t>(ka) * kPanel;
  return w + static_cast<size_t>(P + p) * ps + static_cast<size_t>(ka - n_in) * kPanel;
}

// 16 weights of one panel at one k, widened to f32 (bf16: the upper half of a binary32).
template <bool BF>
SPECCHAT_AVX512 inline __m512 load16(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (BF) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

// One step of k: P weight vectors, each row's x[r, k] broadcast into its P accumulators. Forced
// inline: as an out-of-line call the accumulators would live in memory.
template <bool BF, int R, int P>
SPECCHAT_AVX512 __attribute__((always_inline)) inline void step512(__m512 (&acc)[R][P], const float* x,
                                                                  const uint16_t* w, size_t ps, int n_in, int k) {
  __m512 wv[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) wv[p] = load16<BF>(w + p * ps + static_cast<size_t>(k) * kPanel);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 xv = _mm512_set1_ps(x[static_cast<size_t>(r) * static_cast<size_t>(n_in) + static_cast<size_t>(k)]);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(wv[p], xv, acc[r][p]);
  }
}

// Rows [0, R) of x (row stride n_in) × panels [0, P) at w (panel stride n_in · 16), outputs
// y[t, j0 + 16p + lane] for j0 + 16p + lane < n_out (row stride n_out).
template <bool BF, int R, int P>
SPECCHAT_AVX512 void tile512(const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0) {
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const size_t ps = static_cast<size_t>(n_in) * kPanel;
  // Two steps of k are one cache line of each panel: each pair prefetches the line kPrefetchK
  // steps ahead in every panel (the weights stream from memory in a decode step).
  int k = 0;
  for (; k + 1 < n_in; k += 2) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) prefetch(ahead(w, ps, P, p, k, n_in));
    step512<BF, R, P>(acc, x, w, ps, n_in, k);
    step512<BF, R, P>(acc, x, w, ps, n_in, k + 1);
  }
  if (k < n_in) step512<BF, R, P>(acc, x, w, ps, n_in, k);
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
    const int left = n_out - (j0 + kPanel * p);
    const __mmask16 m = left >= kPanel ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(y + static_cast<size_t>(r) * static_cast<size_t>(n_out) + j0 + kPanel * p, m, acc[r][p]);
    }
  }
}

template <bool BF>
SPECCHAT_AVX512 void tile512_dispatch(int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out,
                                      int j0) {
#define SPECCHAT_T(r, p) \
  case (r) * 16 + (p): return tile512<BF, r, p>(x, w, y, n_in, n_out, j0);
  switch (R * 16 + P) {
    SPECCHAT_T(1, 1) SPECCHAT_T(1, 2) SPECCHAT_T(1, 3) SPECCHAT_T(1, 4)
    SPECCHAT_T(1, 5) SPECCHAT_T(1, 6) SPECCHAT_T(1, 7) SPECCHAT_T(1, 8)
    SPECCHAT_T(2, 1) SPECCHAT_T(2, 2) SPECCHAT_T(2, 3) SPECCHAT_T(2, 4) SPECCHAT_T(2, 5) SPECCHAT_T(2, 6)
    SPECCHAT_T(3, 1) SPECCHAT_T(3, 2) SPECCHAT_T(3, 3) SPECCHAT_T(3, 4) SPECCHAT_T(3, 5) SPECCHAT_T(3, 6)
    SPECCHAT_T(4, 1) SPECCHAT_T(4, 2) SPECCHAT_T(4, 3) SPECCHAT_T(4, 4) SPECCHAT_T(4, 5)
    SPECCHAT_T(5, 1) SPECCHAT_T(5, 2) SPECCHAT_T(5, 3) SPECCHAT_T(5, 4)
    SPECCHAT_T(6, 1) SPECCHAT_T(6, 2) SPECCHAT_T(6, 3) SPECCHAT_T(6, 4)
    SPECCHAT_T(7, 1) SPECCHAT_T(7, 2) SPECCHAT_T(7, 3)
    SPECCHAT_T(8, 1) SPECCHAT_T(8, 2) SPECCHAT_T(8, 3)
    default: break;
  }
#undef SPECCHAT_T
}

// AVX2: a panel is two 8-lane halves.
template <bool BF>
SPECCHAT_AVX2 inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (BF) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return _mm256_cvtph_ps(h);
}

template <bool BF, int R, int P>
SPECCHAT_AVX2 __attribute__((always_inline)) inline void step256(__m256 (&acc)[R][2 * P], const float* x,
                                                                const uint16_t* w, size_t ps, int n_in, int k) {
  __m256 wv[2 * P];
#pragma GCC unroll 8
  for (int h = 0; h < 2 * P; ++h) wv[h] = load8<BF>(w + (h / 2) * ps + static_cast<size_t>(k) * kPanel + (h % 2) * 8);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 xv = _mm256_set1_ps(x[static_cast<size_t>(r) * static_cast<size_t>(n_in) + static_cast<size_t>(k)]);
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_fmadd_ps(wv[h], xv, acc[r][h]);
  }
}

template <bool BF, int R, int P>
SPECCHAT_AVX2 void tile256(const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0) {
  __m256 acc[R][2 * P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) acc[r][h] = _mm256_setzero_ps();
  }
  const size_t ps = static_cast<size_t>(n_in) * kPanel;
  int k = 0;
  for (; k + 1 < n_in; k += 2) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) prefetch(ahead(w, ps, P, p, k, n_in));
    step256<BF, R, P>(acc, x, w, ps, n_in, k);
    step256<BF, R, P>(acc, x, w, ps, n_in, k + 1);
  }
  if (k < n_in) step256<BF, R, P>(acc, x, w, ps, n_in, k);
  for (int r = 0; r < R; ++r) {
    float* yr = y + static_cast<size_t>(r) * static_cast<size_t>(n_out);
#pragma GCC unroll 8
    for (int h = 0; h < 2 * P; ++h) {
      const int j = j0 + 8 * h;
      if (j + 8 <= n_out) {
        _mm256_storeu_ps(yr + j, acc[r][h]);
      } else if (j < n_out) {
        alignas(32) float tmp[8];
        _mm256_store_ps(tmp, acc[r][h]);
        for (int i = 0; j + i < n_out; ++i) yr[j + i] = tmp[i];
      }
    }
  }
}

template <bool BF>
SPECCHAT_AVX2 void tile256_dispatch(int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out,
                                    int j0) {
  switch (R * 16 + P) {
    case 1 * 16 + 1: return tile256<BF, 1, 1>(x, w, y, n_in, n_out, j0);
    case 1 * 16 + 2: return tile256<BF, 1, 2>(x, w, y, n_in, n_out, j0);
    case 1 * 16 + 3: return tile256<BF, 1, 3>(x, w, y, n_in, n_out, j0);
    case 2 * 16 + 1: return tile256<BF, 2, 1>(x, w, y, n_in, n_out, j0);
    case 2 * 16 + 2: return tile256<BF, 2, 2>(x, w, y, n_in, n_out, j0);
    case 3 * 16 + 1: return tile256<BF, 3, 1>(x, w, y, n_in, n_out, j0);
    case 4 * 16 + 1: return tile256<BF, 4, 1>(x, w, y, n_in, n_out, j0);
    default: break;
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void tile_avx512(bool bf16, int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0) {
  if (bf16) {
    tile512_dispatch<true>(R, P, x, w, y, n_in, n_out, j0);
  } else {
    tile512_dispatch<false>(R, P, x, w, y, n_in, n_out, j0);
  }
}

void tile_avx2(bool bf16, int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0) {
  if (bf16) {
    tile256_dispatch<true>(R, P, x, w, y, n_in, n_out, j0);
  } else {
    tile256_dispatch<false>(R, P, x, w, y, n_in, n_out, j0);
  }
}

}  // namespace specchat::cpu::panels
#endif
