// GGUF tensor names and shapes of a llama model (llama.cpp's names), shared by the backends'
// loaders. Shapes are GGUF ne order: innermost (row length, n_in) first.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model_config.h"

namespace specchat {
class GgufFile;
}

namespace specchat {

struct LlamaTensorShapes {
  explicit LlamaTensorShapes(const ModelConfig& c) {
    const uint64_t d = static_cast<uint64_t>(c.d_model), hd = static_cast<uint64_t>(c.head_dim);
    const uint64_t nq = static_cast<uint64_t>(c.n_head) * hd, nkv = static_cast<uint64_t>(c.n_head_kv) * hd;
    const uint64_t ff = static_cast<uint64_t>(c.d_ff), nv = static_cast<uint64_t>(c.n_vocab);
    embd = {d, nv};
    norm = {d};
    wq = {d, nq};
    wkv = {d, nkv};
    wo = {nq, d};
    w_up = {d, ff};
    w_down = {ff, d};
    bq = {nq};
    bkv = {nkv};
    head_norm = {hd};
    rope_freqs = {static_cast<uint64_t>(c.n_rot() / 2)};
  }
  std::vector<uint64_t> embd;    // token_embd, output: [n_vocab, d_model]
  std::vector<uint64_t> norm;    // attn_norm, ffn_norm, output_norm: [d_model]
  std::vector<uint64_t> wq;      // attn_q: [n_head * head_dim, d_model]
  std::vector<uint64_t> wkv;     // attn_k, attn_v: [n_head_kv * head_dim, d_model]
  std::vector<uint64_t> wo;      // attn_output: [d_model, n_head * head_dim]
  std::vector<uint64_t> w_up;    // ffn_gate, ffn_up: [d_ff, d_model]
  std::vector<uint64_t> w_down;  // ffn_down: [d_model, d_ff]
  std::vector<uint64_t> bq;      // attn_q.bias: [n_head * head_dim]
  std::vector<uint64_t> bkv;     // attn_k.bias, attn_v.bias: [n_head_kv * head_dim]
  std::vector<uint64_t> head_norm;   // attn_q_norm, attn_k_norm: [head_dim]
  std::vector<uint64_t> rope_freqs;  // rope_freqs: [n_rot / 2]
};

// Refuses a file holding a tensor the model's computation would not use (a bias the family does
// not have, a layer past block_count, another model's tensor): such a file would otherwise run
// without it, wrong and without a word. Throws ModelError naming the first such tensor.
void check_tensor_names(const GgufFile& f, const ModelConfig& c);

// Random models (LlamaModel::random): tensor i in the order token_embd, output_norm, output,
// then per layer attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
// ffn_down gets random_fill(seed = random_tensor_seed(seed, i), a = random_tensor_amplitude(n_in))
// rounded to F16 (norms: 1). Both backends use this, so a random model is the same on both.
inline uint64_t random_tensor_seed(uint64_t seed, size_t index) {
  return seed ^ ((static_cast<uint64_t>(index) + 1) * 0xD1B54A32D192ED03ull);
}
// ±1/sqrt(n_in): keeps activations O(1) through the layers.
inline float random_tensor_amplitude(uint64_t n_in) { return 1.0f / std::sqrt(static_cast<float>(n_in)); }

// "blk.<il>."
inline std::string layer_prefix(int il) { return "blk." + std::to_string(il) + "."; }

}  // namespace specchat
