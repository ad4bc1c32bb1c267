#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/quant.h"

#include <stdexcept>
#include <string>

namespace specchat::cuda {
namespace {

__device__ inline float f16_at(const uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

// The 6-bit scale and min of sub-block s of a q4_K/q5_K block (cpu::scale_min_k4).
__device__ inline void scale_min(int s, const uint8_t* sc, int* scale, int* min) {
  if (s < 4) {
    *scale = sc[s] & 63;
    *min = sc[s + 4] & 63;
  } else {
    *scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// Value i of the block at b (layouts: kernels/cpu/quant.h), as cpu::dequantize_row_ref computes it.
template <DType T>
__device__ inline float value_at(const uint8_t* b, int i) {
  if constexpr (T == DType::q8_0) {
    return f16_at(b) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
  } else if constexpr (T == DType::q4_0) {
    const int q = i < 16 ? (b[2 + i] & 0xF) : (b[2 + i - 16] >> 4);
    return f16_at(b) * static_cast<float>(q - 8);
  } else if constexpr (T == DType::q4_k || T == DType::q5_k) {
    const int s = i / 32, l = i % 32;
    const uint8_t* qs = b + (T == DType::q4_k ? 16 : 48);
    int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
    if constexpr (T == DType::q5_k) q |= ((b[16 + l] >> s) & 1) << 4;
    int sc, m;
    scale_min(s, b + 4, &sc, &m);
    const float d1 = f16_at(b) * static_cast<float>(sc), m1 = f16_at(b + 2) * static_cast<float>(m);
    return fmaf(d1, static_cast<float>(q), -m1);
  } else {  // q6_K: ql[128], qh[64], scales[16], d
    const int h = i / 128, r = i % 128, k = r / 32, l = r % 32;
    const uint8_t lo = b[64 * h + 32 * (k % 2) + l];
    const int nib = k < 2 ? (lo & 0xF) : (lo >> 4);
    const int q = nib | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
    const float ds = f16_at(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + i / 16]));
    return ds * static_cast<float>(q - 32);
  }
}

template <DType T>
__global__ void dequantize_kernel(const uint8_t* src, float* dst, int64_t n) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = value_at<T>(src + (i / bs) * bb, static_cast<int>(i % bs));
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

// One warp per weight row j; lane l takes values l, l + 32, ... of the row (coalesced reads
// within each block), rows t0 .. t0 + nt − 1 of x.
template <DType T>
__global__ void quant_matmul_kernel(const float* x, const uint8_t* w, float* y, int n_in, int n_out, int t0,
                                    int nt) {
  constexpr int bs = dtype_block_size(T);
  constexpr int64_t bb = static_cast<int64_t>(dtype_block_bytes(T));
  const int j = static_cast<int>((blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32);
  const int lane = threadIdx.x & 31;
  if (j >= n_out) return;
  const uint8_t* row = w + static_cast<int64_t>(j) * (n_in / bs) * bb;
  float acc[kTok];
  for (int k = 0; k < kTok; ++k) acc[k] = 0.0f;
  for (int i = lane; i < n_in; i += 32) {
    const float v = value_at<T>(row + (i / bs) * bb, i % bs);
    for (int k = 0; k < kTok; ++k) {
      if (k < nt) acc[k] = fmaf(v, x[static_cast<int64_t>(t0 + k) * n_in + i], acc[k]);
    }
  }
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

template <DType T>
void launch_matmul(const float* x, const void* w, float* y, int n_tokens, int n_in, int n_out, cudaStream_t stream) {
  const int warps_per_block = detail::kBlock / 32;
  const dim3 grid(static_cast<unsigned>((n_out + warps_per_block - 1) / warps_per_block));
  for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
    const int nt = n_tokens - t0 < kTok ? n_tokens - t0 : kTok;
    quant_matmul_kernel<T><<<grid, detail::kBlock, 0, stream>>>(x, static_cast<const uint8_t*>(w), y, n_in, n_out,
                                                                 t0, nt);
    SPECCHAT_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void dequantize(const void* src, DType t, float* dst, int64_t n, cudaStream_t stream) {
  check_block(t, n, "cuda::dequantize");
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  const unsigned grid = detail::grid_for(n);
  switch (t) {
    case DType::q8_0: dequantize_kernel<DType::q8_0><<<grid, detail::kBlock, 0, stream>>>(s, dst, n); break;
    case DType::q4_0: dequantize_kernel<DType::q4_0><<<grid, detail::kBlock, 0, stream>>>(s, dst, n); break;
    case DType::q4_k: dequantize_kernel<DType::q4_k><<<grid, detail::kBlock, 0, stream>>>(s, dst, n); break;
    case DType::q5_k: dequantize_kernel<DType::q5_k><<<grid, detail::kBlock, 0, stream>>>(s, dst, n); break;
    default: dequantize_kernel<DType::q6_k><<<grid, detail::kBlock, 0, stream>>>(s, dst, n); break;
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void embedding_gather_quant(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens, int d_model,
                            cudaStream_t stream) {
  check_block(dtype, d_model, "cuda::embedding_gather_quant");
  if (n_tokens <= 0 || d_model == 0) return;
  const auto* tb = static_cast<const uint8_t*>(table);
  const dim3 grid(static_cast<unsigned>(n_tokens));
  switch (dtype) {
    case DType::q8_0: embedding_quant_kernel<DType::q8_0><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model); break;
    case DType::q4_0: embedding_quant_kernel<DType::q4_0><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model); break;
    case DType::q4_k: embedding_quant_kernel<DType::q4_k><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model); break;
    case DType::q5_k: embedding_quant_kernel<DType::q5_k><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model); break;
    default: embedding_quant_kernel<DType::q6_k><<<grid, detail::kBlock, 0, stream>>>(tb, ids, out, d_model); break;
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void quant_matmul(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
                  cudaStream_t stream) {
  check_block(w_type, n_in, "cuda::quant_matmul");
  if (n_tokens < 0 || n_out < 0) throw std::invalid_argument("cuda::quant_matmul: negative size");
  if (n_tokens == 0 || n_out == 0) return;
  switch (w_type) {
    case DType::q8_0: launch_matmul<DType::q8_0>(x, w, y, n_tokens, n_in, n_out, stream); break;
    case DType::q4_0: launch_matmul<DType::q4_0>(x, w, y, n_tokens, n_in, n_out, stream); break;
    case DType::q4_k: launch_matmul<DType::q4_k>(x, w, y, n_tokens, n_in, n_out, stream); break;
    case DType::q5_k: launch_matmul<DType::q5_k>(x, w, y, n_tokens, n_in, n_out, stream); break;
    default: launch_matmul<DType::q6_k>(x, w, y, n_tokens, n_in, n_out, stream); break;
  }
}

}  // namespace specchat::cuda
