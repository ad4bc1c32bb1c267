// Device-side helpers shared by the .cu files (not a public header: nvcc only).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/check.h"

namespace specchat::cuda::detail {

constexpr int kBlock = 256;  // threads per block of the element-wise and row kernels

// Blocks for a grid-stride loop over n elements: enough to fill an H200 several times over,
// and never above the x-dimension limit (2^31 - 1). n > 0.
inline unsigned grid_for(int64_t n, int block = kBlock) {
  const int64_t blocks = (n + block - 1) / block;
  const int64_t cap = int64_t{1} << 16;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum/max; every thread gets the result. blockDim.x a multiple of 32 (<= 1024);
// `red` is __shared__ float[32]. Starts and ends with a barrier so it can be called repeatedly.
__device__ inline float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < n_warps ? red[lane] : 0.0f;
  t = warp_sum(t);
  return t;
}

__device__ inline float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < n_warps ? red[lane] : -INFINITY;
  t = warp_max(t);
  return t;
}

}  // namespace specchat::cuda::detail
