#include "engine/op_profile.h"

namespace specchat {

void name_profile_ops(OpProfile& p, const ModelConfig& c) {
  const std::string d = std::to_string(c.d_model), q = std::to_string(c.n_head * c.head_dim),
                    kv = std::to_string(c.n_head_kv * c.head_dim), ff = std::to_string(c.d_ff);
  const char* names[OpProfile::kCount] = {"embedding rows", "RMSNorm", nullptr, "Q/K/V biases", "RoPE",
                                          "K/V cache writes", "attention", nullptr, "residual adds", nullptr,
                                          "SwiGLU", nullptr, "hidden-state copies", nullptr, "copies to the host"};
  for (int i = 0; i < OpProfile::kCount; ++i) {
    if (names[i]) p.ops[static_cast<size_t>(i)].name = names[i];
  }
  p.ops[OpProfile::matmul_qkv].name = "matmul Q/K/V " + d + " -> " + q + "+" + kv + "+" + kv;
  p.ops[OpProfile::matmul_o].name = "matmul O " + q + " -> " + d;
  p.ops[OpProfile::matmul_gate_up].name = "matmul gate/up " + d + " -> " + ff + "x2";
  p.ops[OpProfile::matmul_down].name = "matmul down " + ff + " -> " + d;
  p.ops[OpProfile::matmul_head].name = "matmul LM head " + d + " -> " + std::to_string(c.n_vocab);
}

}  // namespace specchat
