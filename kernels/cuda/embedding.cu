#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/quant.h"

#include <stdexcept>
#include <string>

namespace specchat::cuda {
namespace {

__device__ inline float load_f32(const float* p, int64_t i) { return p[i]; }
__device__ inline float load_f32(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ inline float load_f32(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

// One block per token; threads stride over d_model (coalesced row reads).
template <typename T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, float* out, int d_model) {
  const int t = blockIdx.x;
  const int64_t row = static_cast<int64_t>(ids[t]) * d_model;
  float* dst = out + static_cast<int64_t>(t) * d_model;
  for (int i = threadIdx.x; i < d_model; i += blockDim.x) dst[i] = load_f32(table, row + i);
}

}  // namespace

void embedding_gather(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens,
                      int d_model, cudaStream_t stream) {
  if (n_tokens <= 0 || d_model <= 0) return;
  const dim3 grid(static_cast<unsigned>(n_tokens));
  switch (dtype) {
    case DType::f32:
      embedding_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const float*>(table), ids, out, d_model);
      break;
    case DType::f16:
      embedding_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const __half*>(table), ids, out, d_model);
      break;
    case DType::bf16:
      embedding_kernel<<<grid, detail::kBlock, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), ids, out,
                                                            d_model);
      break;
    default:
      embedding_gather_quant(table, dtype, ids, out, n_tokens, d_model, stream);  // block types
      return;
  }
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
