// CPU ops: the reference implementations and the CPU backend's kernels. Each op knows nothing
// of the model graph. The CUDA twins in kernels/cuda/ keep these signatures (STYLE.md §3).
// All tensors are row-major f32; shapes are given outermost first.
#pragma once

#include <cstdint>

#include "kernels/cpu/thread_pool.h"

namespace specchat::cpu {

// Keeps OpenBLAS single-threaded: the engine's own ThreadPool runs the decode-loop kernels,
// and two pools spinning on two cores fight (TRAINING-NOTES "thread pools fight").
void set_num_threads(int n);

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T, with W [n_out, n_in] (GGUF/PyTorch layout).
// Own AVX2 kernel up to 32 rows, split over `pool` (serial when null); OpenBLAS sgemm beyond (or
// 32-row chunks when built without BLAS).
void matmul(const float* x, const float* w, float* y, int n_tokens, int n_in, int n_out, ThreadPool* pool = nullptr);

// out[n_tokens, d] = x / sqrt(mean(x^2) + eps) * weight[d]   (RMSNorm, Zhang & Sennrich 2019)
void rmsnorm(const float* x, const float* weight, float* out, int n_tokens, int d, float eps);

// In-place rotary embedding on x [n_tokens, n_head, head_dim], pairing adjacent dimensions
// (2i, 2i+1) as llama's GGUF convention (RoFormer, Su et al. 2021, eq. 34); pos [n_tokens].
void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, float theta);

// The rotation table rope() computes on the fly, for positions [0, n_pos): cos_out/sin_out
// [n_pos, head_dim / 2], angle pos · theta^(−2i / head_dim) in double, rounded to f32.
void rope_table(int n_pos, int head_dim, float theta, float* cos_out, float* sin_out);
// rope() with a precomputed table (same values bit for bit; no allocation, no transcendental
// calls per token). pos[t] must be in [0, n_pos) of the table.
void rope_with_table(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const float* cos_tab,
                     const float* sin_tab);

// Rotary embedding as a model's hyper-parameters define it (llama.cpp's rope_ext without YaRN):
// only the first n_rot dimensions of each head rotate (partial rotary; the rest pass through),
// pair i (i < n_rot / 2) turns by  pos · freq_scale · theta^(−2i / n_rot) / freq_factors[i].
//   neox = false: pairs (2i, 2i+1)             (llama's GGUF convention, LLAMA_ROPE_TYPE_NORM)
//   neox = true:  pairs (i, i + n_rot / 2)     (GPT-NeoX halves: qwen2, qwen3)
// freq_scale is 1 / the linear scaling factor (rope.scaling.type = linear, Chen et al. 2023
// "position interpolation"); freq_factors [n_rot / 2] are Llama 3.1's rope_freqs tensor (null = 1).
struct RopeParams {
  int n_rot = 0;                        // rotated dimensions per head, even, <= head_dim
  float theta = 10000.0f;               // rope.freq_base
  float freq_scale = 1.0f;
  const float* freq_factors = nullptr;  // [n_rot / 2] or null
  bool neox = false;
};
// The table for positions [0, n_pos): cos_out/sin_out [n_pos, n_rot / 2], angle in double,
// rounded to f32. With n_rot = head_dim, freq_scale 1 and no factors it equals rope_table().
void rope_table(int n_pos, const RopeParams& p, float* cos_out, float* sin_out);
// In place on x [n_tokens, n_head, head_dim] with a table from rope_table(n_pos, p, ...).
void rope_with_table(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
                     const float* cos_tab, const float* sin_tab);

// out[n, d_ff] = silu(gate) * up, with gate/up [n, d_ff] (SwiGLU, Shazeer 2020).
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// x[n] += y[n]
void add_inplace(float* x, const float* y, int64_t n);

// Attention of a batch of query tokens over a KV cache with a shared prefix and a tree mask.
// q [n_tokens, n_head, head_dim]; k_cache/v_cache: row s at k_cache + s * kv_stride, each row
// [n_head_kv, head_dim]; batch token i sits in slot kv_pos0 + i. Every token attends to slots
// [0, n_prefix); slot n_prefix + j (j < kv_pos0 + n_tokens − n_prefix) is visible to token i
// when visible[i * n_masked + j] != 0, with n_masked = kv_pos0 + n_tokens − n_prefix.
// out [n_tokens, n_head, head_dim]. GQA: query head h reads kv head h / (n_head / n_head_kv).
// The K/V rows are f32 (k_cache, v_cache) or, when k_cache16 is set, IEEE binary16
// (k_cache16, v_cache16; k_cache/v_cache are then ignored). f16 values are widened to f32
// exactly and the arithmetic is the same, so an f16 cache gives the bits an f32 cache holding
// the same (rounded) values gives.
struct AttentionArgs {
  const float* q;
  const float* k_cache;
  const float* v_cache;
  int64_t kv_stride;     // elements (of the cache's type) between consecutive slots
  int kv_pos0;
  int n_prefix;
  int n_tokens, n_head, n_head_kv, head_dim;
  const uint8_t* visible;  // [n_tokens, n_masked]
  float* out;
  float* scratch;        // [kv_pos0 + n_tokens] score buffer for serial runs; may be null
  const uint16_t* k_cache16 = nullptr;  // f16 K rows (set together with v_cache16), or null
  const uint16_t* v_cache16 = nullptr;
};
// (row, head) pairs are split over `pool` (serial when null); each thread then keeps its own
// score buffer (grown once). A row's result does not depend on the other rows.
void attention(const AttentionArgs& a, ThreadPool* pool = nullptr);
// Several independent attentions (one per sequence of a batch) in one parallel region, so a
// step over N sequences synchronises the pool once per layer, not N times.
// (Pointer and count, not std::span: the CUDA sources include this header as C++17.)
void attention_multi(const AttentionArgs* parts, int n_parts, ThreadPool* pool = nullptr);

// In-place softmax over rows of x [n_rows, n].
void softmax_rows(float* x, int n_rows, int n);

}  // namespace specchat::cpu
