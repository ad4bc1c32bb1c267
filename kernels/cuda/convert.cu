#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/convert.h"

#include <stdexcept>
#include <string>
#include "kernels/random_blocks.h"
#include "kernels/random_hash.h"

namespace specchat::cuda {
namespace {

// Round-to-nearest-even stores, identical to cpu::f32_to_f16 / f32_to_bf16 for non-NaN values.
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ inline void store(__half* p, int64_t i, float v) { p[i] = __float2half_rn(v); }
__device__ inline void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ inline float load(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

#define SPECCHAT_GRID_STRIDE(i, n)                                                     \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void from_f32_kernel(const float* src, T* dst, int64_t n) {
  SPECCHAT_GRID_STRIDE(i, n) store(dst, i, src[i]);
}

template <typename T>
__global__ void to_f32_kernel(const T* src, float* dst, int64_t n) {
  SPECCHAT_GRID_STRIDE(i, n) dst[i] = load(src, i);
}

template <typename T>
__global__ void random_fill_kernel(T* dst, int64_t n, uint64_t seed, float a) {
  SPECCHAT_GRID_STRIDE(i, n) store(dst, i, ::specchat::detail::random_value_f32(seed, static_cast<uint64_t>(i), a));
}

__global__ void random_blocks_kernel(uint8_t* dst, DType t, int64_t n_bytes, uint64_t seed, uint16_t d,
                                     uint16_t dmin) {
  SPECCHAT_GRID_STRIDE(i, n_bytes) dst[i] = ::specchat::detail::random_block_byte(t, seed, static_cast<uint64_t>(i), d, dmin);
}

}  // namespace

void random_fill_blocks(void* dst, DType t, int64_t n, uint64_t seed, float a, cudaStream_t stream) {
  if (!dtype_is_block(t) || n < 0 || n % dtype_block_size(t) != 0) {
    throw std::invalid_argument(std::string("cuda::random_fill_blocks: ") + std::to_string(n) + " values of " +
                                dtype_name(t) + " (block types, whole blocks only)");
  }
  if (n == 0) return;
  uint16_t d = 0, dmin = 0;
  ::specchat::detail::random_block_scales(t, a, &d, &dmin);
  const auto n_bytes = static_cast<int64_t>(dtype_row_bytes(t, static_cast<uint64_t>(n)));
  random_blocks_kernel<<<detail::grid_for(n_bytes), detail::kBlock, 0, stream>>>(static_cast<uint8_t*>(dst), t, n_bytes,
                                                                                  seed, d, dmin);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void convert_from_f32(const float* src, void* dst, DType dtype, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned grid = detail::grid_for(n);
  switch (dtype) {
    case DType::f32:
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                                          cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::f16:
      from_f32_kernel<<<grid, detail::kBlock, 0, stream>>>(src, static_cast<__half*>(dst), n);
      break;
    case DType::bf16:
      from_f32_kernel<<<grid, detail::kBlock, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
      break;
    default:
      throw std::invalid_argument(std::string(dtype_name(dtype)) + " is not an element type (kernels read f32/f16/bf16)");
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned grid = detail::grid_for(n);
  switch (dtype) {
    case DType::f32:
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                                          cudaMemcpyDeviceToDevice, stream));
      return;
    case DType::f16:
      to_f32_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const __half*>(src), dst, n);
      break;
    case DType::bf16:
      to_f32_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const __nv_bfloat16*>(src), dst, n);
      break;
    default:
      throw std::invalid_argument(std::string(dtype_name(dtype)) + " is not an element type (kernels read f32/f16/bf16)");
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void random_fill(void* dst, DType dtype, int64_t n, uint64_t seed, float a, cudaStream_t stream) {
  if (n <= 0) return;
  const unsigned grid = detail::grid_for(n);
  switch (dtype) {
    case DType::f32:
      random_fill_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<float*>(dst), n, seed, a);
      break;
    case DType::f16:
      random_fill_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<__half*>(dst), n, seed, a);
      break;
    case DType::bf16:
      random_fill_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), n, seed, a);
      break;
    default:
      throw std::invalid_argument(std::string(dtype_name(dtype)) + " is not an element type (kernels read f32/f16/bf16)");
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
