// Internal to kernels/cpu: cpu::linear's integer path for block-type weights (linear.h,
// Activations::q8). Each row of x is rounded to 8 bits per block of 32 values (a scale per
// block, like ggml's q8_0), and each weight block's integers are multiplied with those in
// integer arithmetic (exact), then scaled in f32.
//
// The arithmetic every variant performs, so that all of them (scalar twin, AVX2, AVX-512 VNNI)
// give the same bits and a row's result never depends on what it is batched with:
//   - The weights of a row are a stream of 32-value groups e (a q8_0/q4_0 block, a q4_K/q5_K
//     sub-block, two q6_K sub-blocks of 16), each with the activation block of the same columns.
//   - Per group, 8 integer lane sums L[l] = Σ_{i = 4l .. 4l + 3} w_i · a_i (w_i the integer
//     weights: q8_0 q, q4_0 q − 8, q4_K/q5_K q, q6_K q − 32; a_i the activation's integers).
//   - Per group, lane scales s[l] = (d_w · sc) · d_a as f32 products (d_w · sc: the weight block's
//     f16 scale times the sub-block scale, exact; q6_K: lanes 0-3 and 4-7 have their own sub-block
//     scale).
//   - Two sets of 8 f32 accumulators F0 (even groups) and F1 (odd groups):
//     F[e & 1][l] = fma(float(L[l]), s[l], F[e & 1][l]).
//   - q4_K/q5_K only: before the 8 groups of super-block S, F0[j] = fma(−dmin · m_j, dsum_{8S+j},
//     F0[j]) for j = 0..7 (dsum = d_a · Σ a_i of the activation block, f32).
//   - y = hsum(F0 + F1) with hsum(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace specchat::cpu::q8 {

constexpr int kBlock = 32;  // activation values per scale

// x [n_rows, n_in] rounded to 8 bits: per row and block b of 32 values, d = max|x| / 127 (f32),
// a_i = round-half-even(clamp(x_i · (1 / d), −127, 127)), dsum = d · Σ a_i. A block whose d is 0
// or below the smallest normal f32 (1 / d would overflow) gets a_i = 0 (it adds at most
// 1.2e-38 · 127 · Σ|w| to a result). A block holding a NaN gets d = NaN (and an infinity gives
// d = inf, a_i = 0), so every result it touches is NaN, as on the f32 path: the engine's
// non-finite check still sees damaged weights.
struct Act {
  int n_rows = 0, n_in = 0;
  std::vector<int8_t> q;     // [n_rows, n_in]
  std::vector<float> d;      // [n_rows, n_in / 32]
  std::vector<float> dsum;   // [n_rows, n_in / 32]
  const int8_t* qrow(int t) const { return q.data() + static_cast<int64_t>(t) * n_in; }
  const float* drow(int t) const { return d.data() + static_cast<int64_t>(t) * (n_in / kBlock); }
  const float* srow(int t) const { return dsum.data() + static_cast<int64_t>(t) * (n_in / kBlock); }
};

enum class Isa { generic, avx2, avx512 };

// The widest variant this CPU runs: AVX-512 needs F, BW, VL and VNNI; AVX2 needs AVX2 + FMA + F16C.
Isa best_isa();
bool isa_supported(Isa isa);

// Fills `out` from x [n_rows, n_in] (n_in a multiple of 32, else std::invalid_argument), rows
// split over `pool` when there are many. Every variant gives the same bytes.
void quantize(Isa isa, const float* x, int n_rows, int n_in, Act& out, ThreadPool* pool = nullptr);

// Rows j0 .. j0 + nr − 1 (nr <= 4) of y [a.n_rows, n_out] from weights w [n_out, a.n_in] of block
// type t (one of those dtype_is_block lists), by the arithmetic above.
void rows(Isa isa, const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr);

}  // namespace specchat::cpu::q8
