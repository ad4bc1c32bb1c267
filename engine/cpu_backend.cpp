#include "engine/cpu_backend.h"

#include <algorithm>
#include <cmath>

#include "engine/gguf.h"
#include "engine/backend_weights.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"

namespace specchat {

size_t CpuBackend::Weights::bytes() const {
  size_t n = tok_embd.size() + output_norm.size() + output.size();
  for (const auto& l : layers) {
    n += l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() +
         l.ffn_norm.size() + l.w_gate.size() + l.w_up.size() + l.w_down.size();
  }
  return n * sizeof(float);
}

size_t CpuBackend::Scratch::bytes() const {
  return (x.size() + xb.size() + q.size() + k.size() + v.size() + att.size() + gate.size() +
          up.size() + logits.size() + att_scores.size()) * sizeof(float);
}

CpuBackend::CpuBackend(const ModelConfig& c, const BackendShape& sh, Weights w)
    : cfg_(c), w_(std::move(w)) {
  const size_t B = static_cast<size_t>(std::max(1, sh.max_batch));
  const size_t d = static_cast<size_t>(c.d_model), hd = static_cast<size_t>(c.head_dim);
  const size_t nq = static_cast<size_t>(c.n_head) * hd, nkv = static_cast<size_t>(c.n_head_kv) * hd;
  const size_t ff = static_cast<size_t>(c.d_ff), nv = static_cast<size_t>(c.n_vocab);
  s_.x.resize(B * d);
  s_.xb.resize(B * d);
  s_.q.resize(B * nq);
  s_.k.resize(B * nkv);
  s_.v.resize(B * nkv);
  s_.att.resize(B * nq);
  s_.gate.resize(B * ff);
  s_.up.resize(B * ff);
  s_.logits.resize(B * nv);
  s_.att_scores.resize(static_cast<size_t>(sh.n_ctx) + B);
  cpu::set_num_threads(sh.n_threads);
}

MemoryInfo CpuBackend::memory(const KvCache& kv) const {
  MemoryInfo m;
  m.weights_bytes = w_.bytes();
  m.kv_bytes = kv.bytes();
  m.activation_bytes = s_.bytes();
  return m;
}

std::span<const float> CpuBackend::forward(const ForwardArgs& b, KvCache& kv) {
  const ModelConfig& c = cfg_;
  Scratch& s = s_;
  const int n = static_cast<int>(b.tokens.size());
  const int d = c.d_model, hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  for (int i = 0; i < n; ++i) {
    std::copy_n(w_.tok_embd.data() + static_cast<size_t>(b.tokens[i]) * d, d,
                s.x.data() + static_cast<size_t>(i) * d);
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const Weights::Layer& l = w_.layers[static_cast<size_t>(il)];
    cpu::rmsnorm(s.x.data(), l.attn_norm.data(), s.xb.data(), n, d, c.norm_eps);
    cpu::matmul(s.xb.data(), l.wq.data(), s.q.data(), n, d, nq);
    cpu::matmul(s.xb.data(), l.wk.data(), s.k.data(), n, d, nkv);
    cpu::matmul(s.xb.data(), l.wv.data(), s.v.data(), n, d, nkv);
    cpu::rope(s.q.data(), b.pos.data(), n, c.n_head, hd, c.rope_theta);
    cpu::rope(s.k.data(), b.pos.data(), n, c.n_head_kv, hd, c.rope_theta);
    for (int i = 0; i < n; ++i) {
      std::copy_n(s.k.data() + static_cast<size_t>(i) * nkv, nkv, kv.k(il, b.kv_pos0 + i));
      std::copy_n(s.v.data() + static_cast<size_t>(i) * nkv, nkv, kv.v(il, b.kv_pos0 + i));
    }
    cpu::AttentionArgs a{};
    a.q = s.q.data();
    a.k_cache = kv.k(il, 0);
    a.v_cache = kv.v(il, 0);
    a.kv_stride = nkv;
    a.kv_pos0 = b.kv_pos0;
    a.n_prefix = b.n_prefix;
    a.n_tokens = n;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim = hd;
    a.visible = b.visible;
    a.out = s.att.data();
    a.scratch = s.att_scores.data();
    cpu::attention(a);
    cpu::matmul(s.att.data(), l.wo.data(), s.xb.data(), n, nq, d);
    cpu::add_inplace(s.x.data(), s.xb.data(), static_cast<int64_t>(n) * d);
    cpu::rmsnorm(s.x.data(), l.ffn_norm.data(), s.xb.data(), n, d, c.norm_eps);
    cpu::matmul(s.xb.data(), l.w_gate.data(), s.gate.data(), n, d, c.d_ff);
    cpu::matmul(s.xb.data(), l.w_up.data(), s.up.data(), n, d, c.d_ff);
    cpu::swiglu(s.gate.data(), s.up.data(), s.gate.data(), static_cast<int64_t>(n) * c.d_ff);
    cpu::matmul(s.gate.data(), l.w_down.data(), s.xb.data(), n, c.d_ff, d);
    cpu::add_inplace(s.x.data(), s.xb.data(), static_cast<int64_t>(n) * d);
  }
  // Final norm and output projection only for the requested rows.
  const int n_out = static_cast<int>(b.out_rows.size());
  for (int j = 0; j < n_out; ++j) {
    cpu::rmsnorm(s.x.data() + static_cast<size_t>(b.out_rows[j]) * d, w_.output_norm.data(),
                 s.xb.data() + static_cast<size_t>(j) * d, 1, d, c.norm_eps);
  }
  if (n_out > 0) cpu::matmul(s.xb.data(), w_.output.data(), s.logits.data(), n_out, d, c.n_vocab);
  return {s.logits.data(), static_cast<size_t>(n_out) * c.n_vocab};
}

std::unique_ptr<Backend> make_cpu_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s) {
  CpuBackend::Weights w;
  const LlamaTensorShapes sh(c);
  auto load = [&](const std::string& name, const std::vector<uint64_t>& ne) {
    const GgufTensorInfo& t = f.require_tensor(name, ne);
    std::vector<float> out(t.n_elements());
    dequantize_to_f32(t.type, t.data, out.data(), t.n_elements());
    return out;
  };
  try {
    w.tok_embd = load("token_embd.weight", sh.embd);
    w.output_norm = load("output_norm.weight", sh.norm);
    w.output = f.tensor("output.weight") ? load("output.weight", sh.embd) : w.tok_embd;
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = layer_prefix(il);
      CpuBackend::Weights::Layer l;
      l.attn_norm = load(p + "attn_norm.weight", sh.norm);
      l.wq = load(p + "attn_q.weight", sh.wq);
      l.wk = load(p + "attn_k.weight", sh.wkv);
      l.wv = load(p + "attn_v.weight", sh.wkv);
      l.wo = load(p + "attn_output.weight", sh.wo);
      l.ffn_norm = load(p + "ffn_norm.weight", sh.norm);
      l.w_gate = load(p + "ffn_gate.weight", sh.w_up);
      l.w_up = load(p + "ffn_up.weight", sh.w_up);
      l.w_down = load(p + "ffn_down.weight", sh.w_down);
      w.layers.push_back(std::move(l));
    }
  } catch (const GgufError& e) {
    throw ModelError(std::string(e.what()));
  }
  return std::make_unique<CpuBackend>(c, s, std::move(w));
}

std::unique_ptr<Backend> make_cpu_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed) {
  // F16 values from the CUDA random_fill's CPU twin, widened to f32: the same model as
  // make_cuda_backend_random builds on the device (backend_weights.h).
  const LlamaTensorShapes sh(c);
  size_t index = 0;
  std::vector<uint16_t> half;
  auto mat = [&](const std::vector<uint64_t>& ne) {
    const int64_t n = static_cast<int64_t>(ne[0] * ne[1]);
    half.resize(static_cast<size_t>(n));
    cpu::random_fill(half.data(), DType::f16, n, random_tensor_seed(seed, index++), random_tensor_amplitude(ne[0]));
    std::vector<float> out(static_cast<size_t>(n));
    cpu::convert_to_f32(half.data(), DType::f16, out.data(), n);
    return out;
  };
  auto ones = [&]() {
    ++index;
    return std::vector<float>(sh.norm[0], 1.0f);
  };
  CpuBackend::Weights w;
  w.tok_embd = mat(sh.embd);
  w.output_norm = ones();
  w.output = mat(sh.embd);
  for (int il = 0; il < c.n_layer; ++il) {
    CpuBackend::Weights::Layer l;
    l.attn_norm = ones();
    l.wq = mat(sh.wq);
    l.wk = mat(sh.wkv);
    l.wv = mat(sh.wkv);
    l.wo = mat(sh.wo);
    l.ffn_norm = ones();
    l.w_gate = mat(sh.w_up);
    l.w_up = mat(sh.w_up);
    l.w_down = mat(sh.w_down);
    w.layers.push_back(std::move(l));
  }
  return std::make_unique<CpuBackend>(c, s, std::move(w));
}

}  // namespace specchat
