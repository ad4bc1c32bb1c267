// Sampling helpers on the device: softmax, argmax, top-k, top-p over rows of logits.
// CPU twins: cpu::softmax_rows (kernels/cpu/ops.h) and kernels/cpu/sampling.h.
// Inputs are expected finite (the engine refuses non-finite logits before sampling).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specchat::cuda {

// In-place softmax over rows of x [n_rows, n] (f32, device), maximum subtracted first.
// Throws CudaError on a launch error.
void softmax_rows(float* x, int n_rows, int n, cudaStream_t stream);

// ids[r] = index of the largest x[r, :] (the lowest index among equal maxima, as
// specchat::argmax); x [n_rows, n] f32, ids [n_rows] int32, both device; n >= 1.
void argmax_rows(const float* x, int n_rows, int n, int32_t* ids, cudaStream_t stream);

// Largest kTopKMax values: ids[r, 0..k) and vals[r, 0..k) (device) hold the k largest x[r, :]
// sorted by value descending, equal values by ascending id (the engine sampler's order).
// 1 <= k <= min(n, kTopKMax), else std::invalid_argument.
constexpr int kTopKMax = 64;
void topk_rows(const float* x, int n_rows, int n, int k, int32_t* ids, float* vals,
               cudaStream_t stream);

// Nucleus (top-p) cut over probs [n_rows, n] (device), each row sorted descending and summing
// to 1: keeps the shortest prefix whose running sum (in double, in order) reaches top_p (at
// least one entry; all of them when top_p >= 1), sets the rest to 0 and divides the kept ones by
// their sum; n_kept [n_rows] (device, may be null) receives the prefix lengths. Same rule as
// specchat::process_logits. Meant for rows after top-k (the scan is sequential per row).
void topp_rows(float* probs, int n_rows, int n, float top_p, int32_t* n_kept,
               cudaStream_t stream);

}  // namespace specchat::cuda
