// qwen2 (Qwen 2 and 2.5): the llama layer plus biases on the Q, K and V projections, and
// GPT-NeoX RoPE (rotating the two halves of each head).
#include "engine/architecture.h"

namespace specchat {

const Architecture kArchQwen2{"qwen2", RopeMode::neox, TensorUse::required, TensorUse::absent, TensorUse::absent};

}  // namespace specchat
