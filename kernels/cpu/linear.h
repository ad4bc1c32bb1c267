// Small-batch matrix product with weights kept in their file type: the CPU backend's matmul for
// decode, verification batches and (for 16-bit weights) prefill.
#pragma once

#include <span>

#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace specchat::cpu {

// How cpu::linear treats the activations x for block-type weights (16-bit and f32 weights always
// keep them in f32).
//   q8:  each row of x is rounded to 8 bits per block of 32 values (scale max|x| / 127, like
//        ggml's q8_0; for q4_K, q5_K and q6_K weights per super-block of 256, like ggml's
//        q8_K) and multiplied with the weight blocks' integers in integer arithmetic (AVX-512
//        VNNI / AVX2), then scaled in f32 (linear_q8.h gives the exact arithmetic).
//        The engine's default on the CPU: decode reads each weight byte once at a fraction of
//        the f32 path's instructions. Error: the llama.cpp class (it rounds activations the same
//        way); against an f64 forward on the dequantized weights, within the llama_cpp_class
//        tier of tests/data/quant/tolerances.json (Q8_0 3.4e-2, Q4_K_M 4e-2, Q6_K 3.8e-2
//        normalized), 1.0–1.8e-2 measured.
//   f32: the activations are never rounded: block weights are dequantized to f32 exactly as
//        dequantize_row_ref (quant.h) does and products summed in f32, within the strict tier
//        (1e-3 normalized). Slower (the dequantization is the hot loop).
enum class Activations { q8, f32 };

// True when linear() with `act` rounds the activations for weights of type t (t a block type and
// act == q8).
constexpr bool linear_rounds_activations(DType t, Activations act) {
  return act == Activations::q8 && dtype_is_block(t);
}

// y[n_tokens, n_out] = x[n_tokens, n_in] · Wᵀ with W [n_out, n_in] row-major in `w_type`:
// f16, bf16 or one of ggml's block types (q8_0, q4_0, q4_K, q5_K, q6_K; n_in a multiple of the
// block size, else std::invalid_argument); x and y f32. `act` (above) chooses the integer path
// or the f32 path for block types.
//
// f32 path, layout of the work (fused dequantize-and-dot): W is cut into blocks of 4 rows × 1024
// columns; each block is dequantized / widened once into an L1 tile (SIMD: dequant_simd.h) and
// used for every row of x (register tiling: 4 weight rows × 2 (AVX2) or 4 (AVX-512) rows of x per
// step). So a verification batch of k rows reads each weight block from memory once, not k times.
// Decode- and verification-sized batches (16-bit weights: up to 32 rows on AVX-512, every batch
// on AVX2; block weights: up to 2 rows on AVX2, 4 on AVX-512) skip the tile: the weights are
// widened / dequantized in registers as they are used, to the same f32 values, consumed by the
// same operations in the same order (same bits).
// Integer path: the whole row per pass, AVX-512 4 weight rows × up to 4 rows of x, AVX2 4 × 1
// or 2 × 2 (linear_q8.h); weight bytes prefetched 16 KiB ahead. Decode-sized batches run 2-3×
// the f32 path; from ~16 rows (prefill) the two are about even on AVX-512, and AVX2's k-quants
// are up to 1.4× slower there (scripts/bench-linear.cpp, docs/perf/cpu.md).
// Blocks of rows are split over the thread pool (serially when `pool` is null).
//
// Batch invariance (the speculative identity tests rely on it): y[t, j] is computed by the same
// sequence of operations whatever n_tokens is and whichever other rows x holds, so a row's
// result does not depend on what it is batched with (on either path: a row's 8-bit rounding
// depends on that row alone).
//
// f32 weights go to cpu::matmul (ops.h: its own kernel up to 32 rows, OpenBLAS beyond).
// SIMD, chosen once per process from the CPU's features: AVX-512 (16 lanes, 4 rows of x ×
// 4 weight rows per step; the integer path needs AVX-512 BW + VL + VNNI, else it takes AVX2),
// else AVX2 + FMA + F16C (8 lanes, 2 × 4), else a portable loop. The f32 path's result differs
// between these in the last bits (summation order), never within a process; the integer path
// gives the same bits on all of them.
void linear(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
            ThreadPool* pool = nullptr, Activations act = Activations::q8);

// One product y = x · Wᵀ of linear_multi (same shapes and types as linear()).
struct LinearJob {
  const float* x;
  const void* w;
  DType w_type;
  float* y;
  int n_tokens, n_in, n_out;
  Activations act = Activations::q8;
  bool panels = false;  // w is packed by pack_panels (linear_panels.h; w_type f16 or bf16)
};

// Several independent products in ONE pool region (e.g. the Q, K and V projections, or gate and
// up), so a forward synchronises the pool fewer times. Each output is what linear() gives (or
// linear_panels(), for a job with `panels`).
void linear_multi(std::span<const LinearJob> jobs, ThreadPool* pool = nullptr);

// Test oracle of the f32 path (and of the CUDA kernels): widens W exactly (block types:
// dequantize_row_ref) and sums each dot product in double. The integer path's scalar twin is
// linear_with_isa(LinearIsa::generic, …, Activations::q8).
void linear_ref(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out);

// The instruction set linear() dispatches to on this CPU: "avx512f", "avx2+fma+f16c" or "generic".
const char* linear_isa();

// The kernel variants, so tests can hold each one this CPU runs to the scalar twin (linear()
// always takes the widest supported one).
enum class LinearIsa { generic, avx2, avx512 };
bool linear_isa_supported(LinearIsa isa);
// linear() with a chosen variant, serially (16-bit or block weights; std::invalid_argument for
// f32 weights, or a variant this CPU lacks). The integer path's avx512 variant needs AVX-512 BW,
// VL and VNNI; on an AVX-512 CPU without them it runs the AVX2 one.
void linear_with_isa(LinearIsa isa, const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in,
                     int n_out, Activations act = Activations::q8);

}  // namespace specchat::cpu
