// Tiny generated DFlash drafters (docs/design/target-feature-drafters.md) bound to a tiny
// generated llama target, and an independent f64 reference of the DFlash forward written with
// plain loops from the contract's equations, for tests/engine/drafters and
// tests/engine/speculative/test_block_drafter.cpp.
#pragma once

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/drafters/dflash_model.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/gguf_writer.h"
#include "engine/tiny_model.h"

namespace specchat::test {

// A directory for this test program's generated files (removed at exit).
inline const std::string& dflash_temp_dir() {
  struct Dir {
    std::filesystem::path p;
    Dir() : p(std::filesystem::temp_directory_path() / ("specchat-dflash-" + std::to_string(getpid()))) {
      std::filesystem::create_directories(p);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  };
  static const Dir d;
  static const std::string s = d.p.string();
  return s;
}

// The tiny target: llama, d_model 64, 3 layers, the bundled tokenizer (4096 tokens), written
// once to a temp file (a drafter reads the target's embedding and LM head from its file).
inline const std::string& tiny_target_path() {
  static const std::string path = [] {
    TinySpec s;
    s.n_layer = 3;
    s.seed = 21;
    const std::string p = dflash_temp_dir() + "/tiny-target.gguf";
    tiny_model(s).write_file(p);
    return p;
  }();
  return path;
}

inline LlamaModel& tiny_target() {
  static std::unique_ptr<LlamaModel> m = [] {
    LlamaModel::Options o;
    o.n_ctx = 64;
    o.n_threads = 2;
    return LlamaModel::load(tiny_target_path(), o);
  }();
  return *m;
}

struct DFlashSpec {
  int n_layer = 2, d_model = 64, n_head = 4, n_head_kv = 2, head_dim = 24, d_ff = 96, block_size = 5;
  std::vector<int32_t> stored_taps = {3, 1};  // file values (+1): engine hidden layers 2, 0
  int32_t mask = 0;
  DType type = DType::f32;  // matrices' type (f32, f16, bf16 or q8_0); norms always f32
  uint64_t seed = 11;
  bool nan_weight = false;  // output_norm.weight[0] = NaN: a damaged file
};

// A random-weight DFlash file: matrices uniform ±sqrt(3 / n_in), norm weights 1 ± 0.2.
inline GgufBuilder dflash_builder(const DFlashSpec& s) {
  GgufBuilder b;
  b.set_string("general.architecture", "dflash");
  b.set_u32("dflash.block_count", static_cast<uint32_t>(s.n_layer));
  b.set_u32("dflash.embedding_length", static_cast<uint32_t>(s.d_model));
  b.set_u32("dflash.feed_forward_length", static_cast<uint32_t>(s.d_ff));
  b.set_u32("dflash.attention.head_count", static_cast<uint32_t>(s.n_head));
  b.set_u32("dflash.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  b.set_u32("dflash.attention.key_length", static_cast<uint32_t>(s.head_dim));
  b.set_f32("dflash.attention.layer_norm_rms_epsilon", 1e-5f);
  b.set_f32("dflash.rope.freq_base", 10000.0f);
  b.set_u32("dflash.context_length", 64);
  b.set_u32("dflash.block_size", static_cast<uint32_t>(s.block_size));
  b.set_i32_array("dflash.target_layers", s.stored_taps);
  b.set_u32("tokenizer.ggml.mask_token_id", static_cast<uint32_t>(s.mask));
  std::mt19937_64 g(s.seed);
  const uint64_t d = static_cast<uint64_t>(s.d_model), hd = static_cast<uint64_t>(s.head_dim);
  const uint64_t nq = static_cast<uint64_t>(s.n_head) * hd, nkv = static_cast<uint64_t>(s.n_head_kv) * hd;
  const uint64_t ff = static_cast<uint64_t>(s.d_ff), m = s.stored_taps.size();
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    std::uniform_real_distribution<float> u(-std::sqrt(3.0f / static_cast<float>(n_in)), std::sqrt(3.0f / static_cast<float>(n_in)));
    std::vector<float> w(n_in * n_out);
    for (float& x : w) x = u(g);
    switch (s.type) {
      case DType::f16: b.add_tensor_f16(name, {n_in, n_out}, w); break;
      case DType::bf16: b.add_tensor_bf16(name, {n_in, n_out}, w); break;
      case DType::q8_0: b.add_tensor_q8_0(name, {n_in, n_out}, w); break;
      default: b.add_tensor_f32(name, {n_in, n_out}, w); break;
    }
  };
  auto vec = [&](const std::string& name, uint64_t n) {
    std::uniform_real_distribution<float> u(0.8f, 1.2f);
    std::vector<float> w(n);
    for (float& x : w) x = u(g);
    if (s.nan_weight && name == "output_norm.weight") w[0] = std::numeric_limits<float>::quiet_NaN();
    b.add_tensor_f32(name, {n}, w);
  };
  mat("fc.weight", m * d, d);
  vec("enc.output_norm.weight", d);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    vec(p + "attn_norm.weight", d);
    mat(p + "attn_q.weight", d, nq);
    mat(p + "attn_k.weight", d, nkv);
    mat(p + "attn_v.weight", d, nkv);
    mat(p + "attn_output.weight", nq, d);
    vec(p + "attn_q_norm.weight", hd);
    vec(p + "attn_k_norm.weight", hd);
    vec(p + "ffn_norm.weight", d);
    mat(p + "ffn_gate.weight", d, ff);
    mat(p + "ffn_up.weight", d, ff);
    mat(p + "ffn_down.weight", ff, d);
  }
  vec("output_norm.weight", d);
  return b;
}

inline std::string write_dflash(const GgufBuilder& b, const std::string& name) {
  const std::string p = dflash_temp_dir() + "/" + name + ".gguf";
  b.write_file(p);
  return p;
}

// Hidden rows for the tests: data [n_taps, n_rows, d] owned here, in the order of `taps`.
struct OwnedHidden {
  std::vector<int32_t> taps;
  std::vector<float> data;
  int n_rows = 0, d = 0;
  HiddenRows view(int r0 = 0, int n = -1) const {
    HiddenRows h;
    h.taps = taps;
    h.d_model = d;
    h.n_rows = n < 0 ? n_rows - r0 : n;
    h.tap_stride = static_cast<size_t>(n_rows) * static_cast<size_t>(d);
    h.data = data.data() + static_cast<size_t>(r0) * static_cast<size_t>(d);
    return h;
  }
  // Row r of engine layer `layer`.
  const float* row(int32_t layer, int r) const {
    for (size_t t = 0; t < taps.size(); ++t) {
      if (taps[t] == layer) return data.data() + (t * static_cast<size_t>(n_rows) + static_cast<size_t>(r)) * static_cast<size_t>(d);
    }
    return nullptr;
  }
};

inline OwnedHidden random_hidden(const std::vector<int32_t>& taps, int n_rows, int d, uint64_t seed) {
  OwnedHidden h{taps, std::vector<float>(taps.size() * static_cast<size_t>(n_rows) * static_cast<size_t>(d)), n_rows, d};
  std::mt19937_64 g(seed);
  std::normal_distribution<float> u(0.0f, 1.5f);
  for (float& x : h.data) x = u(g);
  return h;
}

// f64 DFlash forward from the contract's equations, reading the drafter file and the target
// file as written. feats(i, t) = hidden row of context row i for the drafter's t-th tap (file
// order). Context rows 0 … n_ctx − 1 at their own positions; block [anchor, MASK…] at
// anchor_pos …; returns logits [B − 1, n_vocab] of block rows 1 … B − 1.
template <class Feats>
std::vector<double> dflash_reference(const GgufFile& f, const GgufFile& target, int n_ctx, const Feats& feats,
                                     int32_t anchor, int anchor_pos) {
  const int d = static_cast<int>(f.get_u32("dflash.embedding_length"));
  const int n_layer = static_cast<int>(f.get_u32("dflash.block_count"));
  const int nh = static_cast<int>(f.get_u32("dflash.attention.head_count"));
  const int nkvh = static_cast<int>(f.get_u32("dflash.attention.head_count_kv"));
  const int hd = static_cast<int>(f.get_u32_or("dflash.attention.key_length", static_cast<uint32_t>(d / nh)));
  const int ff = static_cast<int>(f.get_u32("dflash.feed_forward_length"));
  const int B = static_cast<int>(f.get_u32("dflash.block_size"));
  const int m = static_cast<int>(f.get_i32_array("dflash.target_layers").size());
  const int32_t mask = static_cast<int32_t>(f.get_i64("tokenizer.ggml.mask_token_id"));
  const double eps = f.get_f32_or("dflash.attention.layer_norm_rms_epsilon", 1e-5f);
  const double theta = f.get_f32_or("dflash.rope.freq_base", 10000.0f);
  auto tensor = [](const GgufFile& src, const std::string& name) {
    const GgufTensorInfo& t = src.require_tensor(name);
    std::vector<float> v(t.n_elements());
    dequantize_to_f32(t.type, t.data, v.data(), v.size());
    return std::vector<double>(v.begin(), v.end());
  };
  const std::vector<double> E = f.tensor("token_embd.weight") ? tensor(f, "token_embd.weight") : tensor(target, "token_embd.weight");
  const std::vector<double> W = f.tensor("output.weight")        ? tensor(f, "output.weight")
                                : target.tensor("output.weight") ? tensor(target, "output.weight")
                                                                 : E;
  const int nv = static_cast<int>(E.size() / static_cast<size_t>(d));
  auto rmsnorm = [&](const double* x, const double* w, double* o, int len) {
    double ss = 0;
    for (int i = 0; i < len; ++i) ss += x[i] * x[i];
    const double r = 1.0 / std::sqrt(ss / len + eps);
    for (int i = 0; i < len; ++i) o[i] = x[i] * r * w[i];
  };
  auto linear = [](const std::vector<double>& Wm, const double* x, int n_in, int n_out, double* y) {
    for (int o = 0; o < n_out; ++o) {
      double acc = 0;
      for (int i = 0; i < n_in; ++i) acc += Wm[static_cast<size_t>(o) * n_in + i] * x[i];
      y[o] = acc;
    }
  };
  auto neox = [&](double* v, int heads, int pos) {  // pairs (i, i + hd/2)
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hd / 2; ++i) {
        const double ang = pos * std::pow(theta, -2.0 * i / hd);
        double* x = v + h * hd;
        const double a = x[i], b = x[i + hd / 2];
        x[i] = a * std::cos(ang) - b * std::sin(ang);
        x[i + hd / 2] = a * std::sin(ang) + b * std::cos(ang);
      }
    }
  };
  // 1. Fuse.
  const auto fc = tensor(f, "fc.weight"), enc = tensor(f, "enc.output_norm.weight");
  std::vector<double> C(static_cast<size_t>(n_ctx) * d), feat(static_cast<size_t>(m) * d), tmp(d);
  for (int i = 0; i < n_ctx; ++i) {
    for (int t = 0; t < m; ++t) {
      const float* r = feats(i, t);
      for (int k = 0; k < d; ++k) feat[static_cast<size_t>(t * d + k)] = r[k];
    }
    linear(fc, feat.data(), m * d, d, tmp.data());
    rmsnorm(tmp.data(), enc.data(), &C[static_cast<size_t>(i) * d], d);
  }
  // 3. Block input.
  std::vector<double> x(static_cast<size_t>(B) * d), h(d);
  for (int j = 0; j < B; ++j) {
    const int32_t tok = j == 0 ? anchor : mask;
    for (int k = 0; k < d; ++k) x[static_cast<size_t>(j) * d + k] = E[static_cast<size_t>(tok) * d + k];
  }
  const int nq = nh * hd, nkv = nkvh * hd, n_keys = n_ctx + B;
  for (int il = 0; il < n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const auto an = tensor(f, p + "attn_norm.weight"), wq = tensor(f, p + "attn_q.weight"),
               wk = tensor(f, p + "attn_k.weight"), wv = tensor(f, p + "attn_v.weight"),
               wo = tensor(f, p + "attn_output.weight"), qn = tensor(f, p + "attn_q_norm.weight"),
               kn = tensor(f, p + "attn_k_norm.weight"), fn = tensor(f, p + "ffn_norm.weight"),
               wg = tensor(f, p + "ffn_gate.weight"), wu = tensor(f, p + "ffn_up.weight"),
               wd = tensor(f, p + "ffn_down.weight");
    // Keys/values: context rows (2.: no input norm) then block rows.
    std::vector<double> K(static_cast<size_t>(n_keys) * nkv), V(K.size()), Q(static_cast<size_t>(B) * nq);
    for (int i = 0; i < n_ctx; ++i) {
      double* k = &K[static_cast<size_t>(i) * nkv];
      linear(wk, &C[static_cast<size_t>(i) * d], d, nkv, k);
      linear(wv, &C[static_cast<size_t>(i) * d], d, nkv, &V[static_cast<size_t>(i) * nkv]);
      for (int hh = 0; hh < nkvh; ++hh) rmsnorm(k + hh * hd, kn.data(), k + hh * hd, hd);
      neox(k, nkvh, i);
    }
    for (int j = 0; j < B; ++j) {
      rmsnorm(&x[static_cast<size_t>(j) * d], an.data(), h.data(), d);
      double* q = &Q[static_cast<size_t>(j) * nq];
      double* k = &K[static_cast<size_t>(n_ctx + j) * nkv];
      linear(wq, h.data(), d, nq, q);
      linear(wk, h.data(), d, nkv, k);
      linear(wv, h.data(), d, nkv, &V[static_cast<size_t>(n_ctx + j) * nkv]);
      for (int hh = 0; hh < nh; ++hh) rmsnorm(q + hh * hd, qn.data(), q + hh * hd, hd);
      for (int hh = 0; hh < nkvh; ++hh) rmsnorm(k + hh * hd, kn.data(), k + hh * hd, hd);
      neox(q, nh, anchor_pos + j);
      neox(k, nkvh, anchor_pos + j);
    }
    std::vector<double> att(static_cast<size_t>(B) * nq);
    for (int j = 0; j < B; ++j) {
      for (int hh = 0; hh < nh; ++hh) {
        const int kvh = hh / (nh / nkvh);
        std::vector<double> sc(static_cast<size_t>(n_keys));
        double mx = -1e300, sum = 0;
        for (int s = 0; s < n_keys; ++s) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += Q[static_cast<size_t>(j) * nq + hh * hd + i] * K[static_cast<size_t>(s) * nkv + kvh * hd + i];
          sc[static_cast<size_t>(s)] = dot / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[static_cast<size_t>(s)]);
        }
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int s = 0; s < n_keys; ++s) acc += sc[static_cast<size_t>(s)] * V[static_cast<size_t>(s) * nkv + kvh * hd + i];
          att[static_cast<size_t>(j) * nq + hh * hd + i] = acc / sum;
        }
      }
    }
    std::vector<double> g(ff), u(ff);
    for (int j = 0; j < B; ++j) {
      double* xj = &x[static_cast<size_t>(j) * d];
      linear(wo, &att[static_cast<size_t>(j) * nq], nq, d, tmp.data());
      for (int k = 0; k < d; ++k) xj[k] += tmp[static_cast<size_t>(k)];
      rmsnorm(xj, fn.data(), h.data(), d);
      linear(wg, h.data(), d, ff, g.data());
      linear(wu, h.data(), d, ff, u.data());
      for (int k = 0; k < ff; ++k) g[static_cast<size_t>(k)] = g[static_cast<size_t>(k)] / (1 + std::exp(-g[static_cast<size_t>(k)])) * u[static_cast<size_t>(k)];
      linear(wd, g.data(), ff, d, tmp.data());
      for (int k = 0; k < d; ++k) xj[k] += tmp[static_cast<size_t>(k)];
    }
  }
  const auto on = tensor(f, "output_norm.weight");
  std::vector<double> logits(static_cast<size_t>(B - 1) * nv);
  for (int j = 1; j < B; ++j) {
    rmsnorm(&x[static_cast<size_t>(j) * d], on.data(), h.data(), d);
    linear(W, h.data(), d, nv, &logits[static_cast<size_t>(j - 1) * nv]);
  }
  return logits;
}

}  // namespace specchat::test
