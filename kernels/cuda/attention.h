// Attention over the KV cache with a shared prefix and a tree mask, on the device.
// CPU twin: cpu::attention (kernels/cpu/ops.h), same AttentionArgs.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/cpu/ops.h"

namespace specchat::cuda {

using AttentionArgs = cpu::AttentionArgs;

// Same semantics as cpu::attention; every pointer in `a` is a device pointer (q, k_cache,
// v_cache f32 with slot stride a.kv_stride floats (f16 rows, k_cache16, are refused); visible
// uint8 [n_tokens, n_masked]; out f32 [n_tokens, n_head, head_dim]); a.scratch is not used (may be null). One block per
// (head, token): the n_keys = kv_pos0 + n_tokens scores live in dynamic shared memory, softmax
// with the row maximum subtracted. Differences from the CPU twin: a row whose every key is
// masked (impossible when a token sees itself) gives zeros instead of NaN.
// Limits (std::invalid_argument otherwise): n_head % n_head_kv == 0, 1 <= head_dim <= 256,
// n_keys <= attention_max_keys(head_dim) (48 KB of shared memory: 11104 keys at head_dim 128,
// the 7B shape at n_ctx 4096 needs 4096 + 128), n_tokens <= 65535, kv_stride >=
// n_head_kv * head_dim, 0 <= n_prefix <= n_keys. Throws CudaError on a launch error.
void attention(const AttentionArgs& a, cudaStream_t stream);

// Largest n_keys = kv_pos0 + n_tokens attention() accepts for this head_dim (scores, q and the
// per-warp partial outputs share the default 48 KB of dynamic shared memory).
int attention_max_keys(int head_dim);

}  // namespace specchat::cuda
