// Internal to kernels/cpu: what the tiling cpu::linear (linear.cpp), its AVX-512 paths
// (linear_avx512.cpp) and its register-dequantizing block-weight paths (linear_blocks.cpp)
// share. Not part of the kernel API (linear.h).
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/dtype.h"

namespace specchat::cpu::tiling {

constexpr int kRows = 4;      // weight rows per block
constexpr int kChunk = 1024;  // columns per block: 4 × 1024 f32 = 16 KiB of tile, stays in L1
static_assert(kChunk % 256 == 0, "a chunk holds whole blocks of every block type");

// The bytes of block-type weights from element `off` (a multiple of the block size: rows are
// whole blocks and chunks start at multiples of kChunk).
inline const void* block_at(const void* w, DType t, int64_t off) {
  return static_cast<const uint8_t*>(w) + off / dtype_block_size(t) * static_cast<int64_t>(dtype_block_bytes(t));
}

// Batches of up to this many rows dequantize block-type weights in registers (linear_blocks.cpp);
// larger ones dequantize each chunk once into the L1 tile and reuse it (the dequantization costs
// more than the tile's stores and reloads once it is repeated for every group of rows). Measured
// on this Zen 4 EPYC, one thread, 2048 x 2048 (scripts/bench-linear.cpp), µs for 1 / 4 rows,
// tile -> registers: AVX-512 q8_0 272 -> 154 / 377 -> 238, q4_K 337 -> 243 / 435 -> 345, q6_K
// 398 -> 290 / 493 -> 411; AVX2 q8_0 340 -> 217, q4_K 415 -> 341, q6_K 470 -> 415 at one row,
// but at 4 rows AVX2's 16 registers make the register path slower (q6_K 768 -> 897): 2 there.
constexpr int kDirectMaxBlockRowsAvx512 = 4;
constexpr int kDirectMaxBlockRowsAvx2 = 2;

#if defined(__x86_64__)
#define SPECCHAT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SPECCHAT_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (the f32 path's generic loop sums in another
// order: its results differ from the SIMD ones in the last bits, as linear.h says).
SPECCHAT_AVX2 inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  const __m128 s4 = _mm_add_ps(lo, hi);                     // [0+4, 1+5, 2+6, 3+7]
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));  // [(0+4)+(2+6), (1+5)+(3+7)]
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// Rows j0 .. j0 + nr − 1 of y (nr <= kRows) for every row of x (n_tokens of them), block-type
// weights `w` of type t dequantized in registers: bitwise what the tile path of block_avx2 /
// block_avx512 gives. False (nothing written) when t is not a block type. The CPU must have the
// ISA (the caller dispatches).
bool blocks_direct_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                        int j0, int nr);
bool blocks_direct_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                          int j0, int nr);

// What every widen_* (linear.cpp, linear_avx512.cpp) does alike: n weights from element `off`
// of w into dst as f32 when t is a block type (the AVX2 dequantizer) or f32 (copied); false,
// nothing written, for 16-bit weights, which each widens with its own vectors. The CPU must
// have AVX2 (the caller dispatches).
bool widen_block_or_f32(const void* w, DType t, int64_t off, float* dst, int n);

// AVX-512 twin of block_avx2 (linear.cpp): rows j0 .. j0 + nr − 1 of y[n_tokens, n_out]
// (nr <= kRows) for every row of x[n_tokens, n_in], weights w [n_out, n_in] of any type but f32.
// 16 lanes and 32 registers, so up to 4 rows of x × 4 weight rows (16 accumulators) per pass over
// a chunk; batch-invariant like the AVX2 kernel. The CPU must have AVX-512F (the caller
// dispatches). linear_avx512.cpp.
void block_avx512(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out, int j0, int nr);
#endif

}  // namespace specchat::cpu::tiling
