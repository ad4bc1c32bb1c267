// Internal to kernels/cpu: cpu::linear's integer path for block-type weights (linear.h,
// Activations::q8). Each row of x is rounded to 8 bits (Form::b32: a scale per block of 32
// values, like ggml's q8_0, for q8_0 and q4_0 weights; Form::k256 / k256n: a scale per 256, like
// ggml's q8_K, for q4_K, q5_K and q6_K), and each weight block's integers are multiplied with those in
// integer arithmetic (exact), then scaled in f32.
//
// The arithmetic every variant performs, so that all of them (scalar twin, AVX2, AVX-512 VNNI)
// give the same bits and a row's result never depends on what it is batched with. Form::b32:
//   - The weights of a row are a stream of 32-value groups e (a q8_0/q4_0 block), each with the
//     activation block of the same columns.
//   - Per group, 8 integer lane sums L[l] = Σ_{i = 4l .. 4l + 3} w_i · a_i (w_i the integer
//     weights: q8_0 q, q4_0 q − 8; a_i the activation's integers).
//   - Per group, lane scales s[l] = d_w · d_a as an f32 product (d_w the block's f16 scale).
//   - Two sets of 8 f32 accumulators F0 (even groups) and F1 (odd groups):
//     F[e & 1][l] = fma(float(L[l]), s[l], F[e & 1][l]).
//   - y = hsum(F0 + F1) with hsum(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)).
//
// Form::k256 (q4_K and q5_K; llama.cpp's q8_K): one scale D per super-block of 256 values, so
// the 6-bit sub-block scales apply in integers and a super-block needs two f32 operations per
// lane instead of two per sub-block (about 1.5× the decode speed of the per-32 form on Zen 4,
// docs/perf/cpu.md). The arithmetic, with 16 integer lanes per
// super-block S (sub-blocks j = 0..7 of 32 values; lane group of j: A = {0, 1, 4, 5} → lanes
// 0-7, B = {2, 3, 6, 7} → lanes 8-15, the order AVX-512 reads them in):
//   - I[8·grp(j) + l] = Σ_j sc_j · Σ_{i = 4l .. 4l + 3} q_{32j + i} · a_{32j + i}  (int32, exact;
//     q the 4-bit (q4_K) or 5-bit (q5_K) value)
//   - M[l] = m_{2l} · bsum_{2l} + m_{2l+1} · bsum_{2l+1} for l < 4, 0 for l ≥ 4 (bsum_j = Σ a of
//     sub-block j)
//   - F[l] = fma(float(I[l]), d · D, F[l]), then F[l] = fma(float(M[l]), −(dmin · D), F[l]),
//     for l = 0..15 (d, dmin the block's f16 scales as f32; the products are f32)
//   - y = hsum(F[0..8) + F[8..16)).
// Its integers are magnitudes the 16-bit pair sums hold (31 · 127 · 2 per pair) and 32-bit
// lanes hold (63 · 4 · 31 · 127 · 8 per lane), so every variant computes them exactly.
//
// Form::k256n (q6_K): the same one scale D per 256 values, stored in natural order, with a
// sum per 16 values. Value v of super-block S (0 ≤ v < 256) goes to lane (v mod 64) / 4 of 16:
//   - I[l] = Σ_{v in lane l} sc_{v / 16} · q_v · a_v  (q the unsigned 6-bit value, sc the signed
//     8-bit sub-block scale), then I[0] += −32 · Σ_{s = 0..15} sc_s · bsum16_s (the − 32 of
//     q − 32), all int32, exact (|I| ≤ 16 · 63 · 127 · 128 + 32 · 16 · 128 · 2032)
//   - F[l] = fma(float(I[l]), d · D, F[l]) for l = 0..15; y = hsum(F[0..8) + F[8..16)).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace specchat::cpu::q8 {

constexpr int kBlock = 32;  // activation values per scale

// x [n_rows, n_in] rounded to 8 bits: per row and block b of 32 values, d = max|x| / 127 (f32),
// a_i = round-half-even(clamp(x_i · (1 / d), −127, 127)). A block whose d is 0
// or below the smallest normal f32 (1 / d would overflow) gets a_i = 0 (it adds at most
// 1.2e-38 · 127 · Σ|w| to a result). A block holding a NaN gets d = NaN (and an infinity gives
// d = inf, a_i = 0), so every result it touches is NaN, as on the f32 path: the engine's
// non-finite check still sees damaged weights.
//
// Form::k256 (for q4_K and q5_K; n_in a multiple of 256): the same rule with one d per 256 values, the
// integers of each 128 values stored in the order [0-32, 64-96, 32-64, 96-128) (the order of a
// q4_K/q5_K block's nibbles: one 64-byte load gives two sub-blocks' activations), bsum per 32 values
// (natural order) as int16.
// Form::k256n (for q6_K; n_in a multiple of 256): one d per 256 values, the integers in natural
// order, bsum per 16 values as int16.
enum class Form { b32, k256, k256n };

struct Act {
  Form form = Form::b32;
  int n_rows = 0, n_in = 0;
  std::vector<int8_t> q;     // [n_rows, n_in]
  std::vector<float> d;      // [n_rows, n_in / block]: block 32 (b32) or 256 (k256, k256n)
  std::vector<int16_t> bsum; // [n_rows, n_in / 32] (k256) or [n_rows, n_in / 16] (k256n)
  int block() const { return form == Form::b32 ? kBlock : 256; }
  int bsum_span() const { return form == Form::k256n ? 16 : kBlock; }  // values per bsum entry
  const int8_t* qrow(int t) const { return q.data() + static_cast<int64_t>(t) * n_in; }
  const float* drow(int t) const { return d.data() + static_cast<int64_t>(t) * (n_in / block()); }
  const int16_t* brow(int t) const { return bsum.data() + static_cast<int64_t>(t) * (n_in / bsum_span()); }
};

// The form weights of type t multiply with: k256 for q4_K and q5_K, k256n for q6_K, b32 for
// q8_0 and q4_0.
constexpr Form form_for(DType t) {
  return t == DType::q4_k || t == DType::q5_k ? Form::k256 : t == DType::q6_k ? Form::k256n : Form::b32;
}

// Position of activation i (0 ≤ i < 256) of a super-block in Form::k256's storage order.
constexpr int k256_pos(int i) {
  const int c = i % 128, s = c / 32;  // sub-block within the 128: 0..3 stored as 0, 2, 1, 3
  return i - c + 32 * (s == 1 ? 2 : s == 2 ? 1 : s) + c % 32;
}

enum class Isa { generic, avx2, avx512 };

// The widest variant this CPU runs: AVX-512 needs F, BW, VL and VNNI; AVX2 needs AVX2 + FMA + F16C.
Isa best_isa();
bool isa_supported(Isa isa);

// Fills `out` in `form` from x [n_rows, n_in] (n_in a multiple of 32, of 256 for k256/k256n, else
// std::invalid_argument), rows split over `pool` when there are many. Every variant gives the
// same bytes.
void quantize(Isa isa, const float* x, int n_rows, int n_in, Act& out, ThreadPool* pool = nullptr,
              Form form = Form::b32);

// Rows j0 .. j0 + nr − 1 (nr <= 4) of y [a.n_rows, n_out] from weights w [n_out, a.n_in] of block
// type t (one of those dtype_is_block lists), by the arithmetic above; `a` must be in
// form_for(t) (std::invalid_argument otherwise).
void rows(Isa isa, const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr);

}  // namespace specchat::cpu::q8
