// Block (quantized) weight types on the device: dequantization and a dequantize-and-dot matrix
// product for decode and small batches. CPU twins: cpu::dequantize_row_ref (kernels/cpu/quant.h)
// and cpu::linear / cpu::linear_ref (kernels/cpu/linear.h), same argument order.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cuda {

// dst[n] (f32, device) = the n values at src (device) in block type t (q8_0, q4_0, q4_K, q5_K,
// q6_K), bit for bit what cpu::dequantize_row_ref gives (the same f32 scale products and fmaf).
// std::invalid_argument for an element type or n not whole blocks; CudaError on a launch error.
void dequantize(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream);

// dst[n] (binary16 bits, device) = the same values rounded to nearest even: bit for bit
// cpu::dequantize_row_ref followed by cpu::convert_from_f32(…, DType::f16, …). For the
// "dequantize W to F16 once, then one cuBLAS GEMM" path of verification batches (measured
// against quant_matmul in specchat-gpu-bench). Errors as dequantize.
void dequantize_f16(const void* src, DType t, void* dst, int64_t n, cudaStream_t stream);

// y[n_tokens, n_out] = x[n_tokens, n_in] · Wᵀ with W [n_out, n_in] row-major on the device in
// block type w_type (n_in whole blocks), x and y f32 on the device. One warp per weight row:
// each lane takes 32-value chunks of the row (a q8_0/q4_0 block or a k-quant sub-block; adjacent
// lanes read adjacent bytes, 16-byte loads when w and x are 16-byte aligned), dequantizes them in
// registers (never to memory) and dots them with up to 8 rows of x at a time, so a batch of k
// rows reads W ceil(k / 8) times. Activations stay f32
// (like the CPU kernels: the strict conformance tier); sums in f32 in a fixed order per row, so
// a row's result does not depend on the other rows of the batch. n_tokens == 0 does nothing.
// std::invalid_argument for a bad type or size; CudaError on a launch error.
void quant_matmul(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
                  cudaStream_t stream);

// out[n_tokens, d_model] (f32, device) = row ids[t] of the block-type table [n_vocab, d_model]
// (device) dequantized, bit for bit the CPU twin cpu::embedding_gather. ids on the device, each in
// [0, n_vocab) (checked by the caller). cuda::embedding_gather calls this for block tables.
// std::invalid_argument for an element type or d_model not whole blocks.
void embedding_gather_quant(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens, int d_model,
                            cudaStream_t stream);

}  // namespace specchat::cuda
