#include "engine/backend_weights.h"

#include <set>

#include "engine/backend.h"
#include "engine/gguf.h"

namespace specchat {

void check_tensor_names(const GgufFile& f, const ModelConfig& c) {
  std::set<std::string> want = {"token_embd.weight", "output_norm.weight", "output.weight"};
  if (c.rope_freqs) want.insert("rope_freqs.weight");
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = layer_prefix(il);
    for (const char* t : {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                          "ffn_down"}) {
      want.insert(p + t + ".weight");
    }
    if (c.qkv_bias) {
      for (const char* t : {"attn_q", "attn_k", "attn_v"}) want.insert(p + t + ".bias");
    }
    if (c.qk_norm) {
      want.insert(p + "attn_q_norm.weight");
      want.insert(p + "attn_k_norm.weight");
    }
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!want.count(t.name)) {
      throw ModelError(f.path() + ": tensor '" + t.name + "' is not part of a " + c.architecture + " model with " +
                       std::to_string(c.n_layer) +
                       " layers as SpecChat runs it; refusing the model rather than ignoring the tensor");
    }
  }
}

}  // namespace specchat
