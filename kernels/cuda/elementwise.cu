#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise.h"

namespace specchat::cuda {
namespace {

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    x[i] += y[i];
  }
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(gate, up, out, n);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  add_kernel<<<detail::grid_for(n), detail::kBlock, 0, stream>>>(x, y, n);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
