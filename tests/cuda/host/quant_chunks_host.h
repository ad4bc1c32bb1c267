// The CUDA quant_matmul kernel's block decoding and per-lane arithmetic
// (kernels/cuda/quant_blocks.cuh) run on the host, so its indexing is tested on machines without
// a GPU (quant_chunks_host.cu is compiled by nvcc; these functions call no CUDA runtime).
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::test {

// out[32] = values 32c .. 32c + 31 of the weight row at `row` in block type t, as the kernel's
// chunk_values<t, vec> computes them (vec: the 16-byte-load path; row must then be 16-byte
// aligned for q4_K/q5_K and 2-byte aligned for the others).
void chunk_values_host(DType t, bool vec, const uint8_t* row, int c, float* out);

// y[nt, n_out] = x[nt, n_in] · Wᵀ (W [n_out, n_in] in block type t, nt <= 8) as the kernel
// computes it: per row, 32 lanes' lane_partial sums, then the warp butterfly's order for lane 0.
// vec as above (x then 16-byte aligned too).
void quant_matmul_host(DType t, bool vec, const float* x, const uint8_t* w, float* y, int nt, int n_in, int n_out);

}  // namespace specchat::test
