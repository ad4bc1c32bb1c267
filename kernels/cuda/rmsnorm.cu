#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rmsnorm.h"

namespace specchat::cuda {
namespace {

// One block per token: block-wide sum of squares, then the scaled product (same operation
// order as cpu::rmsnorm: (x * scale) * weight). out may alias x: every element is read and
// written by the same thread, after the reduction.
__global__ void rmsnorm_kernel(const float* x, const float* weight, float* out, int d, float eps) {
  __shared__ float red[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * d;
  float* o = out + static_cast<int64_t>(blockIdx.x) * d;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  ss = detail::block_sum(ss, red);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int i = threadIdx.x; i < d; i += blockDim.x) o[i] = __fmul_rn(xr[i], scale) * weight[i];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float* out, int n_tokens, int d, float eps,
             cudaStream_t stream) {
  if (n_tokens <= 0 || d <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), detail::kBlock, 0, stream>>>(x, weight, out, d, eps);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
