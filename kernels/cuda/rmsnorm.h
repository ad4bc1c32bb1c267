// RMSNorm on the device. CPU twin: cpu::rmsnorm (kernels/cpu/ops.h).
#pragma once

#include <cuda_runtime_api.h>

namespace specchat::cuda {

// out[n_tokens, d] = x / sqrt(mean(x^2) + eps) * weight[d]   (Zhang & Sennrich 2019).
// All pointers f32 on the device; out may alias x. One block per token, sum of squares in f32.
// Throws CudaError on a launch error.
void rmsnorm(const float* x, const float* weight, float* out, int n_tokens, int d, float eps,
             cudaStream_t stream);

}  // namespace specchat::cuda
