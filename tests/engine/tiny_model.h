// Small generated GGUF models of every supported architecture, and an independent f64 reference
// forward that follows the hyper-parameters as written in the file, for tests that mutate keys
// and tensors and check the engine honours (or refuses) each.
//
//   TinySpec s; s.arch = "qwen2";
//   GgufBuilder b = tiny_model(s);          // writes <arch>.* keys, weights (f32), and the
//   b.set_f32("qwen2.rope.freq_base", 500);  // bundled target's tokenizer.* keys (4096 tokens)
//   std::vector<double> ref = reference_logits(GgufFile::from_bytes(b.build()), ids);
#pragma once

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "gguf_writer.h"
#include "test_paths.h"

namespace specchat::test {

struct TinySpec {
  std::string arch = "llama";
  int d_model = 64, n_layer = 2, n_head = 4, n_head_kv = 2, d_ff = 96, n_ctx = 64;
  int head_dim = 0;  // 0 = d_model / n_head; else written as attention.key_length/value_length
  bool tied = false;  // no output.weight
  int pad_vocab = 0;  // UNUSED entries "[PAD<id>]" appended to the vocabulary (and embedding rows)
  uint64_t seed = 7;
};

// The bundled target's vocabulary keys (SentencePiece, 4096 tokens), copied into `b`.
inline void copy_bundled_tokenizer(GgufBuilder& b, const std::string& from = target_model()) {
  static const GgufFile src = GgufFile::open(from);
  for (const auto& [k, v] : src.metadata()) {
    if (k.rfind("tokenizer.", 0) == 0) b.set(k, v);
  }
}

// Appends `n` padding entries (type UNUSED, piece "[PAD<id>]", score 0) to b's vocabulary, as
// converters pad a vocabulary to the embedding's row count.
inline void pad_vocabulary(GgufBuilder& b, int n, int32_t type = 5) {
  const GgufFile f = GgufFile::from_bytes(b.build());
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  auto scores = f.get_f32_array("tokenizer.ggml.scores");
  auto types = f.get_i32_array("tokenizer.ggml.token_type");
  for (int i = 0; i < n; ++i) {
    tokens.push_back("[PAD" + std::to_string(tokens.size()) + "]");
    scores.push_back(0.0f);
    types.push_back(type);
  }
  b.set_string_array("tokenizer.ggml.tokens", tokens);
  b.set_f32_array("tokenizer.ggml.scores", scores);
  b.set_i32_array("tokenizer.ggml.token_type", types);
}

// Random weights: matrices uniform with unit output variance (±sqrt(3 / n_in)), norm weights
// 1 ± 0.2, biases ±0.5, all f32; qwen2 gets Q/K/V biases, qwen3 Q/K head norms.
inline GgufBuilder tiny_model(const TinySpec& s) {
  GgufBuilder b;
  const std::string A = s.arch + ".";
  const int hd = s.head_dim > 0 ? s.head_dim : s.d_model / s.n_head;
  b.set_string("general.architecture", s.arch);
  b.set_u32(A + "context_length", static_cast<uint32_t>(s.n_ctx));
  b.set_u32(A + "embedding_length", static_cast<uint32_t>(s.d_model));
  b.set_u32(A + "block_count", static_cast<uint32_t>(s.n_layer));
  b.set_u32(A + "feed_forward_length", static_cast<uint32_t>(s.d_ff));
  b.set_u32(A + "attention.head_count", static_cast<uint32_t>(s.n_head));
  b.set_u32(A + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (s.head_dim > 0) {
    b.set_u32(A + "attention.key_length", static_cast<uint32_t>(hd));
    b.set_u32(A + "attention.value_length", static_cast<uint32_t>(hd));
  }
  b.set_u32(A + "rope.dimension_count", static_cast<uint32_t>(hd));
  b.set_f32(A + "rope.freq_base", 10000.0f);
  b.set_f32(A + "attention.layer_norm_rms_epsilon", 1e-5f);
  copy_bundled_tokenizer(b);
  if (s.pad_vocab > 0) pad_vocabulary(b, s.pad_vocab);
  const uint64_t nv = 4096 + static_cast<uint64_t>(s.pad_vocab), d = static_cast<uint64_t>(s.d_model), ff = static_cast<uint64_t>(s.d_ff);
  const uint64_t nq = static_cast<uint64_t>(s.n_head * hd), nkv = static_cast<uint64_t>(s.n_head_kv * hd);
  std::mt19937_64 g(s.seed);
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    std::uniform_real_distribution<float> u(-std::sqrt(3.0f / static_cast<float>(n_in)),
                                            std::sqrt(3.0f / static_cast<float>(n_in)));
    std::vector<float> w(n_in * n_out);
    for (float& x : w) x = u(g);
    b.add_tensor_f32(name, {n_in, n_out}, w);
  };
  auto vec = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::uniform_real_distribution<float> u(center - spread, center + spread);
    std::vector<float> w(n);
    for (float& x : w) x = u(g);
    b.add_tensor_f32(name, {n}, w);
  };
  mat("token_embd.weight", d, nv);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    vec(p + "attn_norm.weight", d, 1.0f, 0.2f);
    mat(p + "attn_q.weight", d, nq);
    mat(p + "attn_k.weight", d, nkv);
    mat(p + "attn_v.weight", d, nkv);
    if (s.arch == "qwen2") {
      vec(p + "attn_q.bias", nq, 0.0f, 0.5f);
      vec(p + "attn_k.bias", nkv, 0.0f, 0.5f);
      vec(p + "attn_v.bias", nkv, 0.0f, 0.5f);
    }
    if (s.arch == "qwen3") {
      vec(p + "attn_q_norm.weight", static_cast<uint64_t>(hd), 1.0f, 0.2f);
      vec(p + "attn_k_norm.weight", static_cast<uint64_t>(hd), 1.0f, 0.2f);
    }
    mat(p + "attn_output.weight", nq, d);
    vec(p + "ffn_norm.weight", d, 1.0f, 0.2f);
    mat(p + "ffn_gate.weight", d, ff);
    mat(p + "ffn_up.weight", d, ff);
    mat(p + "ffn_down.weight", ff, d);
  }
  vec("output_norm.weight", d, 1.0f, 0.2f);
  if (!s.tied) mat("output.weight", d, nv);
  return b;
}

// f64 forward of a tiny_model file over `ids` (one causal sequence from position 0), reading
// every hyper-parameter as the file states it: head_dim from key_length (else d / n_head),
// rope.dimension_count rotated dims, NeoX halves for qwen2/qwen3 (adjacent pairs for llama),
// rope.freq_base, linear scaling (rope.scaling.factor or rope.scale_linear), rope_freqs,
// RMSNorm epsilon, optional biases and head norms, tied output. Returns logits [n, n_vocab].
inline std::vector<double> reference_logits(const GgufFile& f, const std::vector<int32_t>& ids) {
  const std::string arch = f.get_string("general.architecture"), A = arch + ".";
  const int d = static_cast<int>(f.get_u32(A + "embedding_length"));
  const int n_layer = static_cast<int>(f.get_u32(A + "block_count"));
  const int nh = static_cast<int>(f.get_u32(A + "attention.head_count"));
  const int nkvh = static_cast<int>(f.get_u32(A + "attention.head_count_kv"));
  const int ff = static_cast<int>(f.get_u32(A + "feed_forward_length"));
  const int hd = static_cast<int>(f.get_u32_or(A + "attention.key_length", static_cast<uint32_t>(d / nh)));
  const int n_rot = static_cast<int>(f.get_u32_or(A + "rope.dimension_count", static_cast<uint32_t>(hd)));
  const double theta = f.get_f32_or(A + "rope.freq_base", 10000.0f);
  const double eps = f.get_f32_or(A + "attention.layer_norm_rms_epsilon", 1e-5f);
  double scale = 1.0;
  if (f.get_string_or(A + "rope.scaling.type", "") == "linear") scale = 1.0 / f.get_f32(A + "rope.scaling.factor");
  if (f.has(A + "rope.scale_linear")) scale = 1.0 / f.get_f32(A + "rope.scale_linear");
  const bool neox = arch != "llama";
  auto tensor = [&](const std::string& name) {
    const GgufTensorInfo& t = f.require_tensor(name);
    std::vector<float> v(t.n_elements());
    dequantize_to_f32(t.type, t.data, v.data(), v.size());
    return std::vector<double>(v.begin(), v.end());
  };
  auto has = [&](const std::string& name) { return f.tensor(name) != nullptr; };
  const std::vector<double> E = tensor("token_embd.weight");
  const int nv = static_cast<int>(E.size() / static_cast<size_t>(d));
  const int n = static_cast<int>(ids.size());
  std::vector<double> factors;
  if (has("rope_freqs.weight")) factors = tensor("rope_freqs.weight");
  auto rmsnorm = [&](const double* x, const double* w, double* o, int len) {
    double ss = 0;
    for (int i = 0; i < len; ++i) ss += x[i] * x[i];
    const double r = 1.0 / std::sqrt(ss / len + eps);
    for (int i = 0; i < len; ++i) o[i] = x[i] * r * w[i];
  };
  // y[n_out] = W[n_out, n_in] x (+ b)
  auto linear = [](const std::vector<double>& W, const double* x, int n_in, int n_out, double* y, const double* b) {
    for (int o = 0; o < n_out; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int i = 0; i < n_in; ++i) acc += W[static_cast<size_t>(o) * n_in + i] * x[i];
      y[o] = acc;
    }
  };
  auto rope = [&](double* v, int heads, int pos) {
    for (int h = 0; h < heads; ++h) {
      double* x = v + h * hd;
      for (int i = 0; i < n_rot / 2; ++i) {
        double ang = pos * scale * std::pow(theta, -2.0 * i / n_rot);
        if (!factors.empty()) ang /= factors[static_cast<size_t>(i)];
        const int a = neox ? i : 2 * i, bb = neox ? i + n_rot / 2 : 2 * i + 1;
        const double xa = x[a], xb = x[bb];
        x[a] = xa * std::cos(ang) - xb * std::sin(ang);
        x[bb] = xa * std::sin(ang) + xb * std::cos(ang);
      }
    }
  };
  std::vector<double> x(static_cast<size_t>(n) * d);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < d; ++i) x[static_cast<size_t>(t) * d + i] = E[static_cast<size_t>(ids[static_cast<size_t>(t)]) * d + i];
  }
  const int nq = nh * hd, nkv = nkvh * hd;
  std::vector<double> h(d), q(static_cast<size_t>(n) * nq), k(static_cast<size_t>(n) * nkv), v(k.size()),
      att(nq), tmp(d), g(ff), u(ff);
  for (int il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const auto an = tensor(p + "attn_norm.weight"), wq = tensor(p + "attn_q.weight"), wk = tensor(p + "attn_k.weight"),
               wv = tensor(p + "attn_v.weight"), wo = tensor(p + "attn_output.weight"),
               fn = tensor(p + "ffn_norm.weight"), wg = tensor(p + "ffn_gate.weight"), wu = tensor(p + "ffn_up.weight"),
               wd = tensor(p + "ffn_down.weight");
    const bool bias = has(p + "attn_q.bias"), qkn = has(p + "attn_q_norm.weight");
    const std::vector<double> bq = bias ? tensor(p + "attn_q.bias") : std::vector<double>(),
                              bk = bias ? tensor(p + "attn_k.bias") : std::vector<double>(),
                              bv = bias ? tensor(p + "attn_v.bias") : std::vector<double>(),
                              qn = qkn ? tensor(p + "attn_q_norm.weight") : std::vector<double>(),
                              kn = qkn ? tensor(p + "attn_k_norm.weight") : std::vector<double>();
    for (int t = 0; t < n; ++t) {
      rmsnorm(&x[static_cast<size_t>(t) * d], an.data(), h.data(), d);
      double* qt = &q[static_cast<size_t>(t) * nq];
      double* kt = &k[static_cast<size_t>(t) * nkv];
      linear(wq, h.data(), d, nq, qt, bias ? bq.data() : nullptr);
      linear(wk, h.data(), d, nkv, kt, bias ? bk.data() : nullptr);
      linear(wv, h.data(), d, nkv, &v[static_cast<size_t>(t) * nkv], bias ? bv.data() : nullptr);
      if (qkn) {
        for (int hh = 0; hh < nh; ++hh) rmsnorm(qt + hh * hd, qn.data(), qt + hh * hd, hd);
        for (int hh = 0; hh < nkvh; ++hh) rmsnorm(kt + hh * hd, kn.data(), kt + hh * hd, hd);
      }
      rope(qt, nh, t);
      rope(kt, nkvh, t);
    }
    for (int t = 0; t < n; ++t) {
      for (int hh = 0; hh < nh; ++hh) {
        const int kvh = hh / (nh / nkvh);
        std::vector<double> sc(static_cast<size_t>(t) + 1);
        double mx = -1e300;
        for (int s = 0; s <= t; ++s) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += q[static_cast<size_t>(t) * nq + hh * hd + i] * k[static_cast<size_t>(s) * nkv + kvh * hd + i];
          sc[static_cast<size_t>(s)] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[static_cast<size_t>(s)]);
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int s = 0; s <= t; ++s) acc += sc[static_cast<size_t>(s)] * v[static_cast<size_t>(s) * nkv + kvh * hd + i];
          att[static_cast<size_t>(hh * hd + i)] = acc / sum;
        }
      }
      double* xt = &x[static_cast<size_t>(t) * d];
      linear(wo, att.data(), nq, d, tmp.data(), nullptr);
      for (int i = 0; i < d; ++i) xt[i] += tmp[static_cast<size_t>(i)];
    }
    for (int t = 0; t < n; ++t) {
      double* xt = &x[static_cast<size_t>(t) * d];
      rmsnorm(xt, fn.data(), h.data(), d);
      linear(wg, h.data(), d, ff, g.data(), nullptr);
      linear(wu, h.data(), d, ff, u.data(), nullptr);
      for (int i = 0; i < ff; ++i) g[static_cast<size_t>(i)] = g[static_cast<size_t>(i)] / (1 + std::exp(-g[static_cast<size_t>(i)])) * u[static_cast<size_t>(i)];
      linear(wd, g.data(), ff, d, tmp.data(), nullptr);
      for (int i = 0; i < d; ++i) xt[i] += tmp[static_cast<size_t>(i)];
    }
  }
  const auto on = tensor("output_norm.weight");
  const auto W = has("output.weight") ? tensor("output.weight") : E;
  std::vector<double> logits(static_cast<size_t>(n) * nv);
  for (int t = 0; t < n; ++t) {
    rmsnorm(&x[static_cast<size_t>(t) * d], on.data(), h.data(), d);
    linear(W, h.data(), d, nv, &logits[static_cast<size_t>(t) * nv], nullptr);
  }
  return logits;
}

}  // namespace specchat::test
