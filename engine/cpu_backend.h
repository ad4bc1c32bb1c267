// CpuBackend: f32 weights in RAM and the CPU ops of kernels/cpu (OpenBLAS matmuls). The
// reference forward: the CUDA backend and every CUDA op are checked against it.
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"

namespace specchat {

class CpuBackend final : public Backend {
 public:
  // Weights as f32 in memory, PyTorch layout: a matrix [n_out, n_in] (GGUF ne = {n_in, n_out}).
  struct Weights {
    struct Layer {
      std::vector<float> attn_norm;     // [d_model]
      std::vector<float> wq;            // [n_head * head_dim, d_model]
      std::vector<float> wk, wv;        // [n_head_kv * head_dim, d_model]
      std::vector<float> wo;            // [d_model, n_head * head_dim]
      std::vector<float> ffn_norm;      // [d_model]
      std::vector<float> w_gate, w_up;  // [d_ff, d_model]
      std::vector<float> w_down;        // [d_model, d_ff]
    };
    std::vector<float> tok_embd;     // [n_vocab, d_model]
    std::vector<Layer> layers;       // [n_layer]
    std::vector<float> output_norm;  // [d_model]
    std::vector<float> output;       // [n_vocab, d_model] (a copy of tok_embd when tied)
    size_t bytes() const;
  };

  // Takes the weights (shapes checked by the factory) and sizes the scratch for `s`.
  CpuBackend(const ModelConfig& c, const BackendShape& s, Weights w);

  BackendKind kind() const override { return BackendKind::cpu; }
  std::span<const float> forward(const ForwardArgs& a, KvCache& kv) override;
  MemoryInfo memory(const KvCache& kv) const override;
  std::string device_name() const override { return "CPU"; }

 private:
  // Activations for the largest batch, allocated once (no allocation in the decode loop).
  struct Scratch {
    std::vector<float> x, xb, q, k, v, att, gate, up, logits, att_scores;
    size_t bytes() const;
  };
  ModelConfig cfg_;
  Weights w_;
  Scratch s_;
};

}  // namespace specchat
