// Panel-packed 16-bit weights and their product: the CPU backend's matmul for F16 and BF16
// matrices (issue 10 §1: a verification batch of k rows costs little more than one row).
//
// Layout. A weight matrix W [n_out, n_in] (row-major, F16 or BF16) is repacked once, at load,
// into panels of kPanel = 16 output rows: panel p holds, for k = 0 … n_in − 1 in order, the 16
// values W[16p + 0 … 16p + 15, k] (32 bytes per k). The last panel is padded with zero rows.
// Bytes: panel_bytes() = ceil(n_out / 16) · 16 · n_in · 2, the matrix's own size up to the padding.
//
// Product (outer-product form, as GEMM micro-kernels compute): for each k, one vector load
// widens 16 weights of a panel and every row t of the batch adds x[t, k] · those 16 weights into
// its accumulator (AVX-512: up to 8 rows × 3 panels = 24 accumulators in registers). There are
// no horizontal reductions, and one weight load serves every row: 8 rows run at about the FMA
// peak (a Zen 5 core, warm, 320 → 1728: 208 GFLOP/s of a measured 206 peak, against 141 for the
// row-major dot-product kernel of cpu::linear; docs/perf/cpu.md, 2026-12-05 third session).
//
// Arithmetic, exactly: y[t, j] = fma(W[j, n_in−1], x[t, n_in−1], … fma(W[j, 1], x[t, 1],
// fma(W[j, 0], x[t, 0], 0.0f)) …): one chain of single-rounded fused multiply-adds over k in
// order. Every variant (AVX-512, AVX2, the generic twin) and every tiling performs that chain,
// so the results have the same bits on every CPU, for any n_tokens and any rows batched together
// (batch invariance, which the speculative identity tests rely on), threaded or not. They differ
// from cpu::linear's row-major kernel (another summation order) in the last bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/linear.h"
#include "kernels/dtype.h"

namespace specchat::cpu {

class ThreadPool;

inline constexpr int kPanel = 16;  // output rows per panel

// Bytes of the packed form of an [n_out, n_in] 16-bit matrix (padding included).
size_t panel_bytes(int n_out, int n_in);

// Repacks W [n_out, n_in] row-major, `type` f16 or bf16 (std::invalid_argument otherwise, or for
// n_out/n_in < 1), into `dst` (panel_bytes(n_out, n_in) bytes; any alignment). Panels are split
// over `pool` when given.
void pack_panels(const void* w, DType type, int n_out, int n_in, void* dst, ThreadPool* pool = nullptr);

// y[n_tokens, n_out] = x[n_tokens, n_in] · Wᵀ with W packed by pack_panels (`type` the type it
// was packed from); x and y f32, row-major. Panels are split over `pool` (serially when null).
void linear_panels(const float* x, const void* wp, DType type, float* y, int n_tokens, int n_in, int n_out,
                   ThreadPool* pool = nullptr);

// linear_panels with a chosen variant, serially (std::invalid_argument for a variant this CPU
// lacks): tests hold each variant to the generic twin, bit for bit.
void linear_panels_with_isa(LinearIsa isa, const float* x, const void* wp, DType type, float* y, int n_tokens,
                            int n_in, int n_out);

// linear_multi (linear.h) for jobs that all have `panels`: one pool region over the panels of
// every job, in job order. Each output is what linear_panels() gives.
void linear_multi_panels(std::span<const LinearJob> jobs, ThreadPool* pool);

// The panels [p0, p1) of one product (serial).
void linear_panels_range(const float* x, const void* wp, DType type, float* y, int n_tokens, int n_in, int n_out,
                         int p0, int p1);

}  // namespace specchat::cpu
