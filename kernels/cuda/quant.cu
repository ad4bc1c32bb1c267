#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/quant.h"
#include "kernels/cuda/quant_blocks.cuh"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace specchat::cuda {
namespace {

using blocks::chunk_values;
using blocks::f16_at;
using blocks::value_at;

template <DType T>
__global__ void dequantize_kernel(const uint8_t* src, float* dst, int64_t n) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = value_at<T>(src + (i / bs) * bb, static_cast<int>(i % bs));
  }
}

template <DType T>
__global__ void dequantize_f16_kernel(const uint8_t* src, __half* dst, int64_t n) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = __float2half_rn(value_at<T>(src + (i / bs) * bb, static_cast<int>(i % bs)));
  }
}

// One block per token; threads stride over the row's values.
template <DType T>
__global__ void embedding_quant_kernel(const uint8_t* table, const int32_t* ids, float* out, int d_model) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  const int t = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[t]) * (d_model / bs) * bb;
  float* dst = out + static_cast<int64_t>(t) * d_model;
  for (int i = threadIdx.x; i < d_model; i += blockDim.x) dst[i] = value_at<T>(row + (i / bs) * bb, i % bs);
}

constexpr int kTok = 8;  // rows of x per pass

// One warp per weight row j; lane l takes the row's 32-value chunks l, l + 32, ... (adjacent
// lanes read adjacent bytes), dequantizes each chunk in registers and dots it with rows
// t0 .. t0 + nt − 1 of x. kVec: the weights start 16-byte aligned and x 16-byte aligned (wide
// loads); otherwise byte and scalar loads. The sum order per row is fixed (chunk by chunk, then
// the warp tree), so each row's result is independent of nt.
template <DType T, bool kVec>
__global__ void __launch_bounds__(detail::kBlock, 3)
    quant_matmul_kernel(const float* x, const uint8_t* w, float* y, int n_in, int n_out, int t0,
                                    int nt) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  const int j = static_cast<int>((blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (j >= n_out) return;
  const uint8_t* row = w + static_cast<int64_t>(j) * (n_in / bs) * bb;
  float acc[kTok];
#pragma unroll
  for (int k = 0; k < kTok; ++k) acc[k] = 0.0f;
  blocks::lane_partial<T, kVec, kTok>(row, x, n_in, t0, nt, lane, acc);
#pragma unroll
  for (int k = 0; k < kTok; ++k) {
    const float s = detail::warp_sum(acc[k]);
    if (lane == 0 && k < nt) y[static_cast<int64_t>(t0 + k) * n_out + j] = s;
  }
}

void check_block(DType t, int64_t n, const char* what) {
  if (!dtype_is_block(t) || n < 0 || n % dtype_block_size(t) != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " values of " + dtype_name(t) +
                                " (block types, whole blocks only)");
  }
}

// Calls f(std::integral_constant<DType, T>{}) for the block type t (checked by check_block).
template <class F>
void for_block_type(DType t, F&& f) {
  switch (t) {
    case DType::q8_0: f(std::integral_constant<DType, DType::q8_0>{}); break;
    case DType::q4_0: f(std::integral_constant<DType, DType::q4_0>{}); break;
    case DType::q4_k: f(std::integral_constant<DType, DType::q4_k>{}); break;
    case DType::q5_k: f(std::integral_constant<DType, DType::q5_k>{}); break;
    default: f(std::integral_constant<DType, DType::q6_k>{}); break;
  }
}

template <DType T, bool kVec>
void launch_matmul_as(const float* x, const void* w, float* y, int n_tokens, int n_in, int n_out, cudaStream_t stream) {
  const int warps_per_block = detail::kBlock / 32;
  const dim3 grid(static_cast<unsigned>((n_out + warps_per_block - 1) / warps_per_block));
  for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
    const int nt = n_tokens - t0 < kTok ? n_tokens - t0 : kTok;
    quant_matmul_kernel<T, kVec><<<grid, detail::kBlock, 0, stream>>>(x, static_cast<const uint8_t*>(w), y, n_in,
                                                                       n_out, t0, nt);
    SPECCHAT_CUDA_CHECK_LAUNCH();
  }
}

// Wide loads need the weights and x 16-byte aligned (rows then are too: a row is whole blocks
// of 144 or 176 bytes for q4_K/q5_K, n_in a multiple of 32 floats for x; the other types read
// 16-bit words at even offsets of 2-byte aligned blocks).
template <DType T>
void launch_matmul(const float* x, const void* w, float* y, int n_tokens, int n_in, int n_out, cudaStream_t stream) {
  const bool vec = reinterpret_cast<uintptr_t>(w) % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0;
  if (vec) {
    launch_matmul_as<T, true>(x, w, y, n_tokens, n_in, n_out, stream);
  } else {
    launch_matmul_as<T, false>(x, w, y, n_tokens, n_in, n_out, stream);
  }
}

}  // namespace

void dequantize(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  check_block(t, n, "cuda::dequantize");
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  const unsigned grid = detail::grid_for(n);
  for_block_type(t, [&](auto tag) {
    dequantize_kernel<decltype(tag)::value><<<grid, detail::kBlock, 0, stream>>>(s, dst, n);
  });
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void dequantize_f16(const void* src, DType t, void* dst, int64_t n, cudaStream_t stream) {
  check_block(t, n, "cuda::dequantize_f16");
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<__half*>(dst);
  const unsigned grid = detail::grid_for(n);
  for_block_type(t, [&](auto tag) {
    dequantize_f16_kernel<decltype(tag)::value><<<grid, detail::kBlock, 0, stream>>>(s, d, n);
  });
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void embedding_gather_quant(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens, int d_model,
                            cudaStream_t stream) {
  check_block(dtype, d_model, "cuda::embedding_gather_quant");
  if (n_tokens <= 0 || d_model == 0) return;
  const auto* tb = static_cast<const uint8_t*>(table);
  const dim3 grid(static_cast<unsigned>(n_tokens));
  for_block_type(dtype, [&](auto tag) {
    embedding_quant_kernel<decltype(tag)::value><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model);
  });
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void quant_matmul(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
                  cudaStream_t stream) {
  check_block(w_type, n_in, "cuda::quant_matmul");
  if (n_tokens < 0 || n_out < 0) throw std::invalid_argument("cuda::quant_matmul: negative size");
  if (n_tokens == 0 || n_out == 0) return;
  for_block_type(w_type, [&](auto tag) {
    launch_matmul<decltype(tag)::value>(x, w, y, n_tokens, n_in, n_out, stream);
  });
}

}  // namespace specchat::cuda
