// Matrix product with f16/bf16/f32 weights; CPU twin of kernels/cuda/matmul.h.
#pragma once

#include <cstddef>

#include "kernels/dtype.h"

namespace specchat::cpu {

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T with W [n_out, n_in] row-major in w_dtype.
// Mirrors the device path: for f16/bf16 weights x is first rounded to w_dtype (nearest even),
// then products are summed (here in double, so this is the reference for the device's f32
// sums). F32 weights call the f32 cpu::matmul. x_scratch/scratch_bytes exist for signature
// parity with the device launcher and are not used (may be null/0).
void matmul(const float* x, const void* w, DType w_dtype, float* y, int n_tokens, int n_in,
            int n_out, void* x_scratch, size_t scratch_bytes);

}  // namespace specchat::cpu
