#include "engine/model_config.h"

#include <cmath>
#include <set>

#include "engine/backend.h"
#include "engine/gguf.h"

namespace specchat {

namespace {

void require(bool ok, const GgufFile& f, const std::string& what) {
  if (!ok) throw GgufError(GgufErrorKind::absurd_value, f.path() + ": " + what);
}

[[noreturn]] void refuse(const GgufFile& f, const std::string& key, const std::string& why) {
  throw ModelError(f.path() + ": " + key + ": " + why);
}

// Keys under "<arch>." that SpecChat reads. Those not handled in from_gguf's body change nothing
// in the forward: rope.scaling.finetuned (a note on training), tensor_data_layout (the
// converter's row order, already what the RoPE pairing expects), expert_used_count (checked with
// expert_count).
const std::set<std::string>& known_keys() {
  static const std::set<std::string> k = {
      "context_length", "embedding_length", "block_count", "feed_forward_length", "vocab_size",
      "attention.head_count", "attention.head_count_kv", "attention.key_length", "attention.value_length",
      "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon", "attention.causal",
      "attention.sliding_window", "attention.clamp_kqv", "attention.max_alibi_bias", "attention.scale",
      "rope.dimension_count", "rope.freq_base", "rope.scale_linear", "rope.scaling.type", "rope.scaling.factor",
      "rope.scaling.original_context_length", "rope.scaling.attn_factor", "rope.scaling.finetuned",
      "expert_count", "expert_used_count", "logit_scale", "attn_logit_softcapping", "final_logit_softcapping",
      "embedding_scale", "residual_scale", "use_parallel_residual", "tensor_data_layout"};
  return k;
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.architecture = f.get_string("general.architecture");
  const Architecture* arch = find_architecture(c.architecture);
  if (!arch) {
    throw ModelError(f.path() + ": general.architecture is '" + c.architecture +
                     "', which SpecChat does not run (supported: " + supported_architecture_names() + ")");
  }
  const std::string A = c.architecture + ".";
  for (const auto& [key, value] : f.metadata()) {
    if (key.rfind(A, 0) == 0 && !known_keys().count(key.substr(A.size()))) {
      refuse(f, key, "unknown hyper-parameter key; refusing the model rather than ignoring what it may change");
    }
  }
  c.d_model = static_cast<int>(f.get_u32(A + "embedding_length"));
  c.n_layer = static_cast<int>(f.get_u32(A + "block_count"));
  c.n_head = static_cast<int>(f.get_u32(A + "attention.head_count"));
  c.n_head_kv = static_cast<int>(f.get_u32_or(A + "attention.head_count_kv", static_cast<uint32_t>(c.n_head)));
  c.d_ff = static_cast<int>(f.get_u32(A + "feed_forward_length"));
  c.n_ctx_train = static_cast<int>(f.get_u32(A + "context_length"));
  c.rope_theta = f.get_f32_or(A + "rope.freq_base", 10000.0f);
  c.norm_eps = f.get_f32_or(A + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.n_vocab = static_cast<int>(f.get_u32_or(A + "vocab_size", 0));
  // Sizes a sane file has: guards against absurd allocations before any tensor is read.
  constexpr int kMax = 1 << 20;
  require(c.d_model > 0 && c.d_model <= kMax, f, A + "embedding_length out of range");
  require(c.n_layer > 0 && c.n_layer <= 1024, f, A + "block_count out of range");
  require(c.n_head > 0 && c.n_head <= c.d_model, f, A + "attention.head_count out of range");
  require(c.n_head_kv > 0 && c.n_head % c.n_head_kv == 0, f,
          A + "attention.head_count_kv must divide " + A + "attention.head_count");
  // Head dimension: key_length when given (qwen3: 128 with d_model 1024 and 16 heads), else
  // d_model / n_head. Values (value_length) must have the same width: the attention and the
  // KV cache hold one head_dim for both.
  if (f.has(A + "attention.key_length") || f.has(A + "attention.value_length")) {
    const uint32_t fallback = c.d_model % c.n_head == 0 ? static_cast<uint32_t>(c.d_model / c.n_head) : 0;
    const uint32_t kl = f.get_u32_or(A + "attention.key_length", fallback);
    const uint32_t vl = f.get_u32_or(A + "attention.value_length", kl);
    if (kl != vl) {
      refuse(f, A + "attention.value_length",
             std::to_string(vl) + " differs from " + A + "attention.key_length " + std::to_string(kl) +
                 "; SpecChat runs only equal key and value head widths");
    }
    require(kl > 0 && kl <= 4096, f, A + "attention.key_length out of range");
    c.head_dim = static_cast<int>(kl);
  } else {
    require(c.d_model % c.n_head == 0, f, A + "attention.head_count must divide " + A + "embedding_length");
    c.head_dim = c.d_model / c.n_head;
  }
  require(c.head_dim % 2 == 0, f, "head dimension must be even for RoPE");
  require(static_cast<int64_t>(c.n_head) * c.head_dim <= kMax, f, "attention width (head_count x head dimension) out of range");
  require(c.d_ff > 0 && c.d_ff <= 16 * kMax, f, A + "feed_forward_length out of range");
  require(c.n_ctx_train > 0 && c.n_ctx_train <= 16 * kMax, f, A + "context_length out of range");
  require(c.norm_eps > 0 && c.norm_eps < 1, f, A + "attention.layer_norm_rms_epsilon out of range");
  require(c.rope_theta > 0 && std::isfinite(c.rope_theta), f, A + "rope.freq_base must be positive");
  require(c.n_vocab >= 0 && c.n_vocab <= 16 * kMax, f, A + "vocab_size out of range");

  // Rotary embedding.
  c.rope_mode = arch->rope_mode;
  c.rope_dim = static_cast<int>(f.get_u32_or(A + "rope.dimension_count", static_cast<uint32_t>(c.head_dim)));
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    refuse(f, A + "rope.dimension_count",
           std::to_string(c.rope_dim) + " is not an even number of rotated dimensions in (0, head dimension " +
               std::to_string(c.head_dim) + "]");
  }
  std::string scaling = f.get_string_or(A + "rope.scaling.type", "");
  float factor = f.get_f32_or(A + "rope.scaling.factor", 0.0f);
  if (f.has(A + "rope.scale_linear")) {  // the older spelling of linear scaling
    if (!scaling.empty() && scaling != "linear") {
      refuse(f, A + "rope.scale_linear", "given together with " + A + "rope.scaling.type = '" + scaling + "'");
    }
    scaling = "linear";
    factor = f.get_f32(A + "rope.scale_linear");
  }
  if (scaling == "linear") {
    if (!(factor > 0) || !std::isfinite(factor)) {
      refuse(f, A + "rope.scaling.factor", "linear RoPE scaling needs a positive factor");
    }
    c.rope_freq_scale = 1.0f / factor;
  } else if (scaling.empty() || scaling == "none") {
    if (factor != 0.0f && factor != 1.0f) {
      refuse(f, A + "rope.scaling.factor",
             std::to_string(factor) + " without a scaling type (" + A + "rope.scaling.type is '" + scaling +
                 "'): ambiguous, refused");
    }
  } else {
    refuse(f, A + "rope.scaling.type",
           "'" + scaling + "' RoPE scaling is not implemented (SpecChat runs none and linear; Llama 3's is the "
                           "rope_freqs tensor)");
  }
  // original_context_length only shapes YaRN (refused above); read to check its type.
  (void)f.get_u32_or(A + "rope.scaling.original_context_length", 0);
  if (f.get_f32_or(A + "rope.scaling.attn_factor", 1.0f) != 1.0f) {
    refuse(f, A + "rope.scaling.attn_factor", "attention scaling of RoPE is not implemented");
  }

  // Keys that would change the layer into something SpecChat does not run.
  if (f.get_u32_or(A + "expert_count", 0) > 0 || f.get_u32_or(A + "expert_used_count", 0) > 0) {
    refuse(f, A + "expert_count", "mixture-of-experts models are not supported");
  }
  if (f.has(A + "attention.sliding_window")) {
    const uint32_t w = f.get_u32(A + "attention.sliding_window");
    if (w > 0 && w < static_cast<uint32_t>(c.n_ctx_train)) {
      refuse(f, A + "attention.sliding_window",
             "window " + std::to_string(w) + " is shorter than the context (" + std::to_string(c.n_ctx_train) +
                 "); sliding-window attention is not implemented");
    }
  }
  if (f.has(A + "attention.layer_norm_epsilon")) {
    refuse(f, A + "attention.layer_norm_epsilon", "LayerNorm models are not supported (SpecChat runs RMSNorm)");
  }
  if (!f.get_bool_or(A + "attention.causal", true)) {
    refuse(f, A + "attention.causal", "non-causal (encoder) attention is not supported");
  }
  if (f.get_bool_or(A + "use_parallel_residual", false)) {
    refuse(f, A + "use_parallel_residual", "parallel attention/feed-forward residuals are not supported");
  }
  for (const char* k : {"attention.clamp_kqv", "attention.max_alibi_bias", "attn_logit_softcapping",
                        "final_logit_softcapping"}) {
    if (f.has(A + k) && f.get_f32(A + k) != 0.0f) refuse(f, A + k, "not supported");
  }
  for (const char* k : {"logit_scale", "embedding_scale", "residual_scale"}) {
    if (f.has(A + k) && f.get_f32(A + k) != 1.0f) refuse(f, A + k, "scaling is not supported");
  }
  if (f.has(A + "attention.scale")) {  // replaces 1 / sqrt(head_dim), which SpecChat always uses
    const float s = f.get_f32(A + "attention.scale");
    const float want = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    if (!(std::fabs(s - want) <= 1e-6f * want)) {
      refuse(f, A + "attention.scale", "attention scale other than 1/sqrt(head dimension) is not supported");
    }
  }

  // Tensors the architecture adds (their shapes are checked when the backend loads them).
  auto uses = [&](TensorUse u, const char* probe) {
    return u == TensorUse::required || (u == TensorUse::optional && f.tensor(probe) != nullptr);
  };
  c.qkv_bias = uses(arch->qkv_bias, "blk.0.attn_q.bias");
  c.qk_norm = uses(arch->qk_norm, "blk.0.attn_q_norm.weight");
  c.rope_freqs = uses(arch->rope_freqs, "rope_freqs.weight");
  return c;
}

}  // namespace specchat
