#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rope.h"

namespace specchat::cuda {
namespace {

// One thread per (token, head, pair i). The angle is computed in double like cpu::rope (the
// training framework's table), then rounded; the rotation uses explicit round-to-nearest
// products so nvcc does not fuse them into an FMA the CPU does not use.
__global__ void rope_kernel(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim,
                            float theta) {
  const int half = head_dim / 2;
  const int64_t total = static_cast<int64_t>(n_tokens) * n_head * half;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const int64_t th = idx / half;  // token * n_head + head
    const int t = static_cast<int>(th / n_head);
    const double inv = pow(static_cast<double>(theta), -2.0 * i / head_dim);
    const double ang = static_cast<double>(pos[t]) * inv;
    const float cs = static_cast<float>(cos(ang));
    const float sn = static_cast<float>(sin(ang));
    float* v = x + th * head_dim;
    const float a = v[2 * i], b = v[2 * i + 1];
    v[2 * i] = __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn));
    v[2 * i + 1] = __fadd_rn(__fmul_rn(a, sn), __fmul_rn(b, cs));
  }
}

}  // namespace

void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, float theta,
          cudaStream_t stream) {
  if (head_dim <= 0 || head_dim % 2 != 0) throw std::invalid_argument("rope: head_dim must be even and positive");
  const int64_t total = static_cast<int64_t>(n_tokens) * n_head * (head_dim / 2);
  if (total <= 0) return;
  rope_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(x, pos, n_tokens, n_head, head_dim, theta);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
