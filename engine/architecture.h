// The model architectures SpecChat runs (GGUF `general.architecture`). All are the same
// pre-norm decoder (RMSNorm, rotary attention with GQA, SwiGLU feed-forward; the common layer
// code is the backends' forward); an Architecture names what one family adds to it. Each lives
// in its own file under engine/arch/. Anything else is refused by name.
#pragma once

#include <span>
#include <string>

namespace specchat {

// How a family uses an optional tensor kind.
enum class TensorUse {
  absent,    // the family has none: a file holding it is refused (never silently ignored)
  optional,  // used when present
  required,  // a file without it is refused
};

// Rotary pairing: norm = adjacent pairs (2i, 2i+1), neox = halves (i, i + n_rot / 2).
enum class RopeMode { norm, neox };

struct Architecture {
  const char* name;        // general.architecture, and the prefix of its hyper-parameter keys
  RopeMode rope_mode;
  TensorUse qkv_bias;      // blk.N.attn_q.bias, attn_k.bias, attn_v.bias: [n_head(_kv) * head_dim]
  TensorUse qk_norm;       // blk.N.attn_q_norm.weight, attn_k_norm.weight: [head_dim], RMSNorm per head
  TensorUse rope_freqs;    // rope_freqs.weight [n_rot / 2]: per-pair frequency divisors (Llama 3.1)
};

// engine/arch/*.cpp, one each.
extern const Architecture kArchLlama;  // Llama 2/3, Mistral, TinyLlama, SmolLM
extern const Architecture kArchQwen2;  // Qwen 2 / 2.5
extern const Architecture kArchQwen3;  // Qwen 3 (dense)

// The architecture named `name`, or nullptr when SpecChat has none by that name.
const Architecture* find_architecture(const std::string& name);
// Names of every supported architecture, for error messages.
std::string supported_architecture_names();

}  // namespace specchat
