// Internal to kernels/cpu: cpu::linear's integer path for block-type weights (linear.h,
// Activations::q8). Each row of x is rounded to 8 bits per block of 32 values (a scale per
// block, like ggml's q8_0), and each weight block's integers are multiplied with those in
// integer arithmetic (exact), then scaled in f32.
//
// Two activation formats, chosen by the weight type (format_for):
//
// Format::b32, for q8_0 and q4_0 (a scale per 32 activations, like ggml's q8_0). The arithmetic
// every variant performs, so that all of them (scalar twin, AVX2, AVX-512 VNNI) give the same
// bits and a row's result never depends on what it is batched with:
//   - The weights of a row are a stream of 32-value blocks e, each with the activation block of
//     the same columns.
//   - Per block, 8 integer lane sums L[l] = Σ_{i = 4l .. 4l + 3} w_i · a_i (w_i the integer
//     weights: q8_0 q, q4_0 q − 8; a_i the activation's integers).
//   - Per block, the scale s = d_w · d_a (f32 product).
//   - Two sets of 8 f32 accumulators F0 (even blocks) and F1 (odd blocks):
//     F[e & 1][l] = fma(float(L[l]), s, F[e & 1][l]).
//   - y = hsum(F0 + F1) with hsum(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
//
// Format::k256, for q4_K, q5_K and q6_K (a scale per 256 activations, like ggml's q8_K, with the
// sums of each 16 activations): the sub-block scales and mins are integers, so a super-block's
// whole dot product is one exact integer and the f32 work is two operations per super-block.
//   - Per super-block S: sumi = Σ_j sc_j · Σ_{i in sub-block j} u_i · a_i (exact int32; q4_K/q5_K
//     u = q, 8 sub-blocks of 32, 6-bit sc; q6_K u = q (0..63), 16 sub-blocks of 16, int8 sc).
//   - q4_K/q5_K: summ = Σ_j m_j · (bsum_{2j} + bsum_{2j+1}) (bsum: Σ a over 16 values);
//     acc = fma(float(sumi), d_w · d_a, acc), then acc = fma(float(summ), −(dmin_w · d_a), acc).
//   - q6_K: acc = fma(float(sumi − 32 · Σ_j sc_j · bsum_j), d_w · d_a, acc).
//   - Super-blocks in order from acc = 0; y = acc.
//   Integer sums are exact, so the SIMD variants may group them as they like.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace specchat::cpu::q8 {

constexpr int kBlock = 32;  // activation values per scale

// Activations per scale of each format.
enum class Format { b32, k256 };
constexpr int kSuper = 256;

// x [n_rows, n_in] rounded to 8 bits: per row and block b of 32 (b32) or 256 (k256) values,
// d = max|x| / 127 (f32),
// a_i = round-half-even(clamp(x_i · (1 / d), −127, 127)), dsum = d · Σ a_i. A block whose d is 0
// or below the smallest normal f32 (1 / d would overflow) gets a_i = 0 (it adds at most
// 1.2e-38 · 127 · Σ|w| to a result). A block holding a NaN gets d = NaN (and an infinity gives
// d = inf, a_i = 0), so every result it touches is NaN, as on the f32 path: the engine's
// non-finite check still sees damaged weights.
// b32 also keeps dsum = d · Σ a_i per block; k256 keeps bsum, Σ a_i over each 16 values.
struct Act {
  int n_rows = 0, n_in = 0;
  Format format = Format::b32;
  std::vector<int8_t> q;      // [n_rows, n_in]
  std::vector<float> d;       // [n_rows, n_in / block()]
  std::vector<float> dsum;    // b32: [n_rows, n_in / 32]
  std::vector<int16_t> bsum;  // k256: [n_rows, n_in / 16]
  int block() const { return format == Format::b32 ? kBlock : kSuper; }
  const int8_t* qrow(int t) const { return q.data() + static_cast<int64_t>(t) * n_in; }
  const float* drow(int t) const { return d.data() + static_cast<int64_t>(t) * (n_in / block()); }
  const float* srow(int t) const { return dsum.data() + static_cast<int64_t>(t) * (n_in / kBlock); }
  const int16_t* brow(int t) const { return bsum.data() + static_cast<int64_t>(t) * (n_in / 16); }
};

// The format weights of type t take (k256 for q4_K, q5_K, q6_K; b32 for q8_0, q4_0).
Format format_for(DType t);

enum class Isa { generic, avx2, avx512 };

// The widest variant this CPU runs: AVX-512 needs F, BW, VL and VNNI; AVX2 needs AVX2 + FMA + F16C.
Isa best_isa();
bool isa_supported(Isa isa);

// Fills `out` in format `f` from x [n_rows, n_in] (n_in a multiple of the format's block, else
// std::invalid_argument), rows split over `pool` when there are many. Every variant gives the
// same bytes (k256 has one implementation, the scalar one: a decode's rounding is a small part
// of a linear).
void quantize(Isa isa, const float* x, int n_rows, int n_in, Act& out, ThreadPool* pool = nullptr,
              Format f = Format::b32);

// Rows j0 .. j0 + nr − 1 (nr <= 4) of y [a.n_rows, n_out] from weights w [n_out, a.n_in] of block
// type t (one of those dtype_is_block lists; a.format must be format_for(t), else
// std::invalid_argument), by the arithmetic above.
void rows(Isa isa, const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr);

}  // namespace specchat::cpu::q8
