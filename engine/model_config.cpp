#include "engine/model_config.h"

#include "engine/gguf.h"

namespace specchat {

namespace {
void require(bool ok, const GgufFile& f, const std::string& what) {
  if (!ok) throw GgufError(GgufErrorKind::absurd_value, f.path() + ": " + what);
}
}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.architecture = f.get_string("general.architecture");
  if (c.architecture != "llama") {
    throw GgufError(GgufErrorKind::wrong_type,
                    f.path() + ": general.architecture is '" + c.architecture +
                        "'; only 'llama' is supported");
  }
  c.d_model = static_cast<int>(f.get_u32("llama.embedding_length"));
  c.n_layer = static_cast<int>(f.get_u32("llama.block_count"));
  c.n_head = static_cast<int>(f.get_u32("llama.attention.head_count"));
  c.n_head_kv = static_cast<int>(f.get_u32_or("llama.attention.head_count_kv",
                                              static_cast<uint32_t>(c.n_head)));
  c.d_ff = static_cast<int>(f.get_u32("llama.feed_forward_length"));
  c.n_ctx_train = static_cast<int>(f.get_u32("llama.context_length"));
  c.rope_theta = f.get_f32_or("llama.rope.freq_base", 10000.0f);
  c.norm_eps = f.get_f32_or("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  // Sizes a sane file has: guards against absurd allocations before any tensor is read.
  constexpr int kMax = 1 << 20;
  require(c.d_model > 0 && c.d_model <= kMax, f, "llama.embedding_length out of range");
  require(c.n_layer > 0 && c.n_layer <= 1024, f, "llama.block_count out of range");
  require(c.n_head > 0 && c.n_head <= c.d_model && c.d_model % c.n_head == 0, f,
          "llama.attention.head_count must divide llama.embedding_length");
  require(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0, f,
          "llama.attention.head_count_kv must divide llama.attention.head_count");
  c.head_dim = c.d_model / c.n_head;
  require(c.head_dim % 2 == 0, f, "head dimension must be even for RoPE");
  require(c.d_ff > 0 && c.d_ff <= 16 * kMax, f, "llama.feed_forward_length out of range");
  require(c.n_ctx_train > 0 && c.n_ctx_train <= 16 * kMax, f, "llama.context_length out of range");
  require(c.norm_eps > 0 && c.norm_eps < 1, f, "layer_norm_rms_epsilon out of range");
  require(c.rope_theta > 0, f, "rope.freq_base must be positive");
  return c;
}

}  // namespace specchat
