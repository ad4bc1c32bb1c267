// Hyper-parameters of a model, read from the GGUF `<arch>.*` keys (arch = general.architecture,
// one of architecture.h's families).
#pragma once

#include <cstdint>
#include <string>

#include "engine/architecture.h"

namespace specchat {

class GgufFile;

struct ModelConfig {
  std::string architecture = "llama";
  int n_vocab = 0;      // <arch>.vocab_size when present (must equal the vocabulary and token_embd)
  int d_model = 0;      // <arch>.embedding_length
  int n_layer = 0;      // <arch>.block_count
  int n_head = 0;       // <arch>.attention.head_count
  int n_head_kv = 0;    // <arch>.attention.head_count_kv (defaults to n_head)
  int head_dim = 0;     // <arch>.attention.key_length (= value_length), else d_model / n_head
  int d_ff = 0;         // <arch>.feed_forward_length
  int n_ctx_train = 0;  // <arch>.context_length
  float rope_theta = 10000.0f;  // <arch>.rope.freq_base
  float norm_eps = 1e-5f;       // <arch>.attention.layer_norm_rms_epsilon
  // Rotary embedding: dimensions rotated per head (<arch>.rope.dimension_count; 0 = head_dim),
  // the pairing (the architecture's), and 1 / the linear scaling factor
  // (<arch>.rope.scaling.type = linear with rope.scaling.factor, or the older rope.scale_linear).
  int rope_dim = 0;
  RopeMode rope_mode = RopeMode::norm;
  float rope_freq_scale = 1.0f;
  // What the file's tensors add to the common layer (set from the architecture and, for its
  // optional tensors, from their presence in the file).
  bool qkv_bias = false;    // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;     // blk.N.attn_{q,k}_norm.weight
  bool rope_freqs = false;  // rope_freqs.weight (Llama 3.1/3.2 frequency divisors)

  // Rotated dimensions: rope_dim, or head_dim when 0.
  int n_rot() const { return rope_dim > 0 ? rope_dim : head_dim; }
  // True when the model is the plain llama layer (no biases, no Q/K norm, full adjacent-pair
  // RoPE without scaling): what the CUDA backend runs.
  bool plain_llama() const {
    return !qkv_bias && !qk_norm && !rope_freqs && rope_mode == RopeMode::norm && n_rot() == head_dim &&
           rope_freq_scale == 1.0f && n_head * head_dim == d_model;
  }

  // Reads and validates every `<arch>.*` key. general.architecture must name a supported family
  // (else ModelError naming it). Every hyper-parameter key that changes the computation is
  // honoured or refused; a key SpecChat does not know is refused too, rather than ignored.
  // Sizes must be positive and consistent (n_head_kv divides n_head, head_dim and rope_dim even,
  // rope_dim <= head_dim, nothing absurd). Throws GgufError(missing_key / wrong_type) for an
  // absent or mistyped key, ModelError naming the key for a value SpecChat does not run.
  static ModelConfig from_gguf(const GgufFile& f);
};

}  // namespace specchat
