#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_compact.h"

namespace specchat::cuda {
namespace {

// One thread per (layer, column); each walks j = 0, 1, ... in order. See kv_compact.h for why
// this in-place order is safe; no __restrict__ here on purpose (source and destination rows live
// in the same buffer).
__global__ void kv_compact_kernel(float* cache, int n_layer, int64_t layer_stride,
                                  int64_t row_stride, int row_floats, const int32_t* path,
                                  int n_path, int dst0) {
  const int64_t total = static_cast<int64_t>(n_layer) * row_floats;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t il = idx / row_floats;
    const int64_t c = idx % row_floats;
    float* base = cache + il * layer_stride + c;
    for (int j = 0; j < n_path; ++j) {
      const int64_t src = path[j];
      const int64_t dst = static_cast<int64_t>(dst0) + j;
      if (src != dst) base[dst * row_stride] = base[src * row_stride];
    }
  }
}

}  // namespace

void kv_compact(float* cache, int n_layer, int64_t layer_stride, int64_t row_stride,
                int row_floats, const int32_t* path, int n_path, int dst0, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n_layer) * row_floats;
  if (total <= 0 || n_path <= 0) return;
  kv_compact_kernel<<<detail::grid_for(total), detail::kBlock, 0, stream>>>(
      cache, n_layer, layer_stride, row_stride, row_floats, path, n_path, dst0);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
