#include <climits>
#include <stdexcept>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sampling.h"

namespace specchat::cuda {
namespace {

// (value, index) pairs ordered as the engine sampler: larger value first, then lower index.
__device__ inline bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// Block-wide best pair; every thread gets it. blockDim.x a multiple of 32. sv/si are
// __shared__ [32]; barriers at both ends make repeated calls safe.
__device__ inline void block_best(float& v, int& i, float* sv, int* si) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  v = lane < n_warps ? sv[lane] : -INFINITY;
  i = lane < n_warps ? si[lane] : INT_MAX;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
}

__global__ void softmax_kernel(float* x, int n) {
  __shared__ float red[32];
  float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float mx = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, row[i]);
  mx = detail::block_max(mx, red);
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(row[i] - mx);
    row[i] = e;
    sum += e;
  }
  sum = detail::block_sum(sum, red);
  const float inv = 1.0f / sum;
  for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] *= inv;
}

// Each thread starts from its first element (not from -inf), so a row of equal values (even
// all -inf) yields index 0 like cpu::argmax_rows.
__global__ void argmax_kernel(const float* x, int n, int32_t* ids) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float bv = -INFINITY;
  int bi = INT_MAX;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (bi == INT_MAX || better(row[i], i, bv, bi)) {
      bv = row[i];
      bi = i;
    }
  }
  block_best(bv, bi, sv, si);
  if (threadIdx.x == 0) ids[blockIdx.x] = bi;
}

// k rounds of a block-wide best over the elements that come after the previous pick in the
// sampler's order (value descending, index ascending): no marks, no sort, exact ties.
__global__ void topk_kernel(const float* x, int n, int k, int32_t* ids, float* vals) {
  __shared__ float sv[32];
  __shared__ int si[32];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float pv = INFINITY;
  int pi = -1;  // previous pick; everything comes after (+inf, -1) except +inf itself
  bool first = true;
  for (int r = 0; r < k; ++r) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const float v = row[i];
      const bool after = first || v < pv || (v == pv && i > pi);
      if (after && (bi == INT_MAX || better(v, i, bv, bi))) {
        bv = v;
        bi = i;
      }
    }
    block_best(bv, bi, sv, si);
    if (threadIdx.x == 0) {
      ids[static_cast<int64_t>(blockIdx.x) * k + r] = bi;
      vals[static_cast<int64_t>(blockIdx.x) * k + r] = bv;
    }
    pv = bv;
    pi = bi;
    first = false;
  }
}

// Thread 0 finds the cut with the same sequential double sums as cpu::topp_rows (bit-identical
// result); then the block rescales.
__global__ void topp_kernel(float* probs, int n, float top_p, int32_t* n_kept) {
  __shared__ int cut_s;
  __shared__ double kept_s;
  float* row = probs + static_cast<int64_t>(blockIdx.x) * n;
  if (threadIdx.x == 0) {
    int cut = n;
    if (top_p < 1.0f) {
      double acc = 0;
      for (int i = 0; i < n; ++i) {
        acc += row[i];
        if (acc >= top_p) {
          cut = i + 1;
          break;
        }
      }
    }
    double kept = 0;
    for (int i = 0; i < cut; ++i) kept += row[i];
    cut_s = cut;
    kept_s = kept;
    if (n_kept != nullptr) n_kept[blockIdx.x] = cut;
  }
  __syncthreads();
  const int cut = cut_s;
  const double kept = kept_s;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    row[i] = i < cut ? static_cast<float>(row[i] / kept) : 0.0f;
  }
}

constexpr int kRowThreads = 512;

}  // namespace

void softmax_rows(float* x, int n_rows, int n, cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  softmax_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(x, n);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void argmax_rows(const float* x, int n_rows, int n, int32_t* ids, cudaStream_t stream) {
  if (n < 1) throw std::invalid_argument("argmax_rows: n must be >= 1");
  if (n_rows <= 0) return;
  argmax_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(x, n, ids);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void topk_rows(const float* x, int n_rows, int n, int k, int32_t* ids, float* vals,
               cudaStream_t stream) {
  if (k < 1 || k > n || k > kTopKMax) throw std::invalid_argument("topk_rows: k must be in [1, min(n, 64)]");
  if (n_rows <= 0) return;
  topk_kernel<<<static_cast<unsigned>(n_rows), kRowThreads, 0, stream>>>(x, n, k, ids, vals);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

void topp_rows(float* probs, int n_rows, int n, float top_p, int32_t* n_kept, cudaStream_t stream) {
  if (n_rows <= 0 || n <= 0) return;
  topp_kernel<<<static_cast<unsigned>(n_rows), detail::kBlock, 0, stream>>>(probs, n, top_p, n_kept);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
