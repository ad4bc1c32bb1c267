#include <stdexcept>
#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.cuh"

namespace specchat::cuda {
namespace {

constexpr int kThreads = 256;               // 8 warps per (head, token) block
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;            // per-lane accumulators: kMaxHeadDim / 32
constexpr int kChunks = kMaxHeadDim / 32;
constexpr int kSmemLimit = 48 * 1024;       // default dynamic shared memory per block, bytes

struct Params {
  const float* q;
  const float* k;
  const float* v;
  int64_t kv_stride;
  const uint8_t* visible;
  float* out;
  int n_keys, n_prefix, n_head, group, head_dim;
  float scale;
};

// Block (h, i): query head h of batch token i. Shared memory: q [head_dim], per-warp partial
// outputs [kWarps, head_dim], scores [n_keys].
//  1. scores: each warp takes keys j = warp, warp + 8, ...; lanes split head_dim (coalesced key
//     row reads) and a warp sum gives every lane the dot; masked keys get -inf.
//  2. softmax: block max, exp(s - max) (masked -> 0), block sum.
//  3. output: each warp accumulates its keys' p * v rows (lanes over head_dim), then the warps'
//     partials are summed and divided by the sum.
__global__ void __launch_bounds__(kThreads) attention_kernel(Params p) {
  extern __shared__ float smem[];
  __shared__ float red[32];
  const int h = blockIdx.x, i = blockIdx.y;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hd = p.head_dim;
  float* qs = smem;
  float* part = smem + hd;
  float* s = part + kWarps * hd;
  const int hk = h / p.group;
  const int64_t head_off = static_cast<int64_t>(hk) * hd;
  const float* q = p.q + (static_cast<int64_t>(i) * p.n_head + h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
  __syncthreads();

  const int n_masked = p.n_keys - p.n_prefix;
  const uint8_t* vis = p.visible + static_cast<int64_t>(i) * n_masked;
  float local_max = -INFINITY;
  for (int j = warp; j < p.n_keys; j += kWarps) {
    float sc = -INFINITY;
    if (j < p.n_prefix || vis[j - p.n_prefix] != 0) {
      const float* k = p.k + j * p.kv_stride + head_off;
      float dot = 0.0f;
      for (int d = lane; d < hd; d += 32) dot += qs[d] * k[d];
      sc = detail::warp_sum(dot) * p.scale;
    }
    if (lane == 0) s[j] = sc;
    local_max = fmaxf(local_max, sc);
  }
  const float mx = detail::block_max(local_max, red);  // its barriers publish s[]

  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < p.n_keys; j += blockDim.x) {
    const float e = s[j] == -INFINITY ? 0.0f : expf(s[j] - mx);
    s[j] = e;
    local_sum += e;
  }
  const float sum = detail::block_sum(local_sum, red);  // its barriers publish s[]
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;

  float acc[kChunks];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) acc[c] = 0.0f;
  for (int j = warp; j < p.n_keys; j += kWarps) {
    const float pj = s[j];
    if (pj == 0.0f) continue;  // masked (uniform across the warp)
    const float* v = p.v + j * p.kv_stride + head_off;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int d = lane + 32 * c;
      if (d < hd) acc[c] += pj * v[d];
    }
  }
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    const int d = lane + 32 * c;
    if (d < hd) part[warp * hd + d] = acc[c];
  }
  __syncthreads();
  float* o = p.out + (static_cast<int64_t>(i) * p.n_head + h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float t = 0.0f;
    for (int w = 0; w < kWarps; ++w) t += part[w * hd + d];
    o[d] = t * inv;
  }
}

size_t smem_bytes(int head_dim, int n_keys) {
  return sizeof(float) * (static_cast<size_t>(head_dim) * (1 + kWarps) + static_cast<size_t>(n_keys));
}

}  // namespace

int attention_max_keys(int head_dim) {
  // The static `red[32]` shares the 48 KB with the dynamic part.
  return (kSmemLimit - 32 * static_cast<int>(sizeof(float))) / static_cast<int>(sizeof(float)) -
         head_dim * (1 + kWarps);
}

void attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.n_tokens <= 0) return;
  if (a.n_head <= 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0) {
    throw std::invalid_argument("attention: n_head must be a positive multiple of n_head_kv");
  }
  if (a.head_dim < 1 || a.head_dim > kMaxHeadDim) {
    throw std::invalid_argument("attention: head_dim must be in [1, 256]");
  }
  const int n_keys = a.kv_pos0 + a.n_tokens;
  if (a.kv_pos0 < 0 || a.n_prefix < 0 || a.n_prefix > n_keys) {
    throw std::invalid_argument("attention: need kv_pos0 >= 0 and 0 <= n_prefix <= kv_pos0 + n_tokens");
  }
  if (n_keys > attention_max_keys(a.head_dim)) {
    throw std::invalid_argument("attention: " + std::to_string(n_keys) + " keys exceed the limit of " +
                                std::to_string(attention_max_keys(a.head_dim)));
  }
  if (a.n_tokens > 65535) throw std::invalid_argument("attention: more than 65535 query tokens");
  if (a.k_cache16 || a.v_cache16) {
    throw std::invalid_argument("attention: the CUDA kernel reads f32 K/V rows only (the CUDA backend keeps an f32 cache)");
  }
  if (a.kv_stride < static_cast<int64_t>(a.n_head_kv) * a.head_dim) {
    throw std::invalid_argument("attention: kv_stride smaller than n_head_kv * head_dim");
  }
  Params p;
  p.q = a.q;
  p.k = a.k_cache;
  p.v = a.v_cache;
  p.kv_stride = a.kv_stride;
  p.visible = a.visible;
  p.out = a.out;
  p.n_keys = n_keys;
  p.n_prefix = a.n_prefix;
  p.n_head = a.n_head;
  p.group = a.n_head / a.n_head_kv;
  p.head_dim = a.head_dim;
  p.scale = 1.0f / sqrtf(static_cast<float>(a.head_dim));
  const dim3 grid(static_cast<unsigned>(a.n_head), static_cast<unsigned>(a.n_tokens));
  attention_kernel<<<grid, kThreads, smem_bytes(a.head_dim, n_keys), stream>>>(p);
  SPECCHAT_CUDA_CHECK_LAUNCH();
}

}  // namespace specchat::cuda
