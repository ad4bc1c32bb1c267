// qwen3 (Qwen 3 dense): no biases; RMSNorm over each head of Q and K (attn_q_norm, attn_k_norm,
// weights [head_dim] shared by the heads) after the projection and before RoPE; GPT-NeoX RoPE.
// Its head dimension is attention.key_length, not embedding_length / head_count.
#include "engine/architecture.h"

namespace specchat {

const Architecture kArchQwen3{"qwen3", RopeMode::neox, TensorUse::absent, TensorUse::required, TensorUse::absent};

}  // namespace specchat
