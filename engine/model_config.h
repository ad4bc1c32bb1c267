// Hyper-parameters of a llama-architecture model, read from the GGUF `llama.*` keys.
#pragma once

#include <cstdint>
#include <string>

namespace specchat {

class GgufFile;

struct ModelConfig {
  std::string architecture = "llama";
  int n_vocab = 0;
  int d_model = 0;      // llama.embedding_length
  int n_layer = 0;      // llama.block_count
  int n_head = 0;       // llama.attention.head_count
  int n_head_kv = 0;    // llama.attention.head_count_kv (defaults to n_head)
  int head_dim = 0;     // d_model / n_head
  int d_ff = 0;         // llama.feed_forward_length
  int n_ctx_train = 0;  // llama.context_length
  float rope_theta = 10000.0f;  // llama.rope.freq_base
  float norm_eps = 1e-5f;       // llama.attention.layer_norm_rms_epsilon

  // Reads and validates the keys (general.architecture must be "llama"; sizes positive and
  // consistent: n_head divides d_model, n_head_kv divides n_head, head_dim even, and no size
  // absurd). Throws GgufError(missing_key / wrong_type / absurd_value) naming the key.
  static ModelConfig from_gguf(const GgufFile& f);
};

}  // namespace specchat
