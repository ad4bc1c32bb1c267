// Tiny MTP heads for tests: a tiny llama target written to a temporary GGUF (tiny_model.h,
// the bundled tokenizer's 4096 tokens), a random specchat-mtp head file for it (written with
// engine/gguf_write.h; keys and tensors mutable before writing), the target's hidden states of
// a context (layer n_layer − 1), and an independent f64 reference of the head's math
// (docs/design/target-feature-drafters.md, "MTP head").
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <span>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf_write.h"
#include "engine/model.h"
#include "engine/speculative/mtp_drafter.h"
#include "engine/tiny_model.h"

namespace specchat::test {

// A temporary directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag)
      : path(std::filesystem::temp_directory_path() / ("specchat-" + tag + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// The head's file before writing: metadata and tensors (f32), editable.
struct MtpFile {
  std::map<std::string, GgufValue> kv;
  std::vector<GgufOutTensor> tensors;
  GgufOutTensor* find(const std::string& name) {
    for (auto& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  void drop(const std::string& name) {
    std::erase_if(tensors, [&](const GgufOutTensor& t) { return t.name == name; });
  }
  void write(const std::string& path) const { write_gguf(path, kv, tensors); }
};

inline GgufOutTensor f32_tensor(const std::string& name, std::vector<uint64_t> ne, const std::vector<float>& v) {
  GgufOutTensor t{name, std::move(ne), DType::f32, {}};
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

struct MtpSpec {
  int d_model = 64, n_head = 4, n_head_kv = 2, d_ff = 80;
  float rope_theta = 10000.0f, eps = 1e-5f;
  uint64_t seed = 11;
};

// A random head (matrices ±sqrt(3 / n_in), norms 1 ± 0.2) with llama.cpp's nextn names.
inline MtpFile random_mtp(const MtpSpec& s) {
  MtpFile f;
  const std::string A = "specchat-mtp.";
  f.kv["general.architecture"] = gguf_value::string("specchat-mtp");
  auto u32 = [&](const std::string& k, int v) { f.kv[A + k] = gguf_value::uint(GgufType::u32, static_cast<uint64_t>(v)); };
  u32("block_count", 1);
  u32("embedding_length", s.d_model);
  u32("feed_forward_length", s.d_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  u32("rope.dimension_count", s.d_model / s.n_head);
  u32("context_length", 256);
  f.kv[A + "rope.freq_base"] = gguf_value::f32(s.rope_theta);
  f.kv[A + "attention.layer_norm_rms_epsilon"] = gguf_value::f32(s.eps);
  std::mt19937_64 g(s.seed);
  const uint64_t d = static_cast<uint64_t>(s.d_model), hd = d / static_cast<uint64_t>(s.n_head);
  const uint64_t nq = static_cast<uint64_t>(s.n_head) * hd, nkv = static_cast<uint64_t>(s.n_head_kv) * hd;
  const uint64_t ff = static_cast<uint64_t>(s.d_ff);
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const float a = std::sqrt(3.0f / static_cast<float>(n_in));
    std::uniform_real_distribution<float> u(-a, a);
    std::vector<float> w(n_in * n_out);
    for (float& x : w) x = u(g);
    f.tensors.push_back(f32_tensor(name, {n_in, n_out}, w));
  };
  auto vec = [&](const std::string& name) {
    std::uniform_real_distribution<float> u(0.8f, 1.2f);
    std::vector<float> w(d);
    for (float& x : w) x = u(g);
    f.tensors.push_back(f32_tensor(name, {d}, w));
  };
  mat("blk.0.nextn.eh_proj.weight", 2 * d, d);
  vec("blk.0.nextn.enorm.weight");
  vec("blk.0.nextn.hnorm.weight");
  vec("blk.0.attn_norm.weight");
  mat("blk.0.attn_q.weight", d, nq);
  mat("blk.0.attn_k.weight", d, nkv);
  mat("blk.0.attn_v.weight", d, nkv);
  mat("blk.0.attn_output.weight", nq, d);
  vec("blk.0.ffn_norm.weight");
  mat("blk.0.ffn_gate.weight", d, ff);
  mat("blk.0.ffn_up.weight", d, ff);
  mat("blk.0.ffn_down.weight", ff, d);
  return f;
}

// A tiny llama target (d 64, 2 layers, 4/2 heads, 4096 tokens) written under dir and loaded.
struct TinyTarget {
  std::string path;
  std::unique_ptr<LlamaModel> model;
};
inline TinyTarget tiny_target(const TempDir& dir, uint64_t seed = 7) {
  TinySpec s;
  s.seed = seed;
  TinyTarget t;
  t.path = dir.file("target.gguf");
  tiny_model(s).write_file(t.path);
  LlamaModel::Options o;
  o.n_ctx = 128;
  t.model = LlamaModel::load(t.path, o);
  return t;
}

// The target's hidden states (layer n_layer − 1) of ctx[0, upto): [upto, d_model].
inline std::vector<float> target_hidden(LlamaModel& target, std::span<const int32_t> ctx, int upto) {
  target.kv(0).truncate(0);
  Batch b = Batch::chain(ctx.first(static_cast<size_t>(upto)), 0, true);
  const Batch* one[1] = {&b};
  const int32_t layer[1] = {target.config().n_layer - 1};
  const ForwardOut o = target.forward(one, layer);
  target.kv(0).truncate(0);
  return std::vector<float>(o.hidden.begin(), o.hidden.end());
}

// HiddenRows over rows [n, d] of one tap.
inline HiddenRows hidden_rows(const std::vector<float>& rows, const int32_t& tap, int d) {
  HiddenRows h;
  h.taps = std::span<const int32_t>(&tap, 1);
  h.data = rows.data();
  h.n_rows = static_cast<int>(rows.size()) / d;
  h.tap_stride = rows.size();
  h.d_model = d;
  return h;
}

// Hands the drafter the rows of ctx[n_observed(), n − 1) as the engine does after prefill.
inline void observe_context(MtpDrafter& dr, LlamaModel& target, std::span<const int32_t> ctx) {
  const int n = static_cast<int>(ctx.size());
  const int d = target.config().d_model;
  const std::vector<float> all = target_hidden(target, ctx, n - 1);
  const int from = dr.n_observed();
  const std::vector<float> rows(all.begin() + static_cast<std::ptrdiff_t>(from) * d, all.end());
  const int32_t tap = target.config().n_layer - 1;
  dr.observe(from, ctx.subspan(static_cast<size_t>(from)), hidden_rows(rows, tap, d));
}

// f64 reference of the head over a causal sequence of rows: row r has input hidden h[r] ([d]),
// next token tok[r] and position r (rows attend to rows 0..r). When a row's h is empty it
// takes g of the previous row (the recursive drafting rows). Returns logits [rows, n_vocab]
// and, in g_out, g [rows, d].
inline std::vector<double> reference_mtp(const GgufFile& head, const GgufFile& target,
                                         const std::vector<std::vector<float>>& h, const std::vector<int32_t>& tok,
                                         std::vector<double>* g_out = nullptr) {
  const std::string A = "specchat-mtp.";
  const int d = static_cast<int>(head.get_u32(A + "embedding_length"));
  const int nh = static_cast<int>(head.get_u32(A + "attention.head_count"));
  const int nkvh = static_cast<int>(head.get_u32(A + "attention.head_count_kv"));
  const int ff = static_cast<int>(head.get_u32(A + "feed_forward_length"));
  const int hd = d / nh;
  const double theta = head.get_f32(A + "rope.freq_base");
  const double eps = head.get_f32(A + "attention.layer_norm_rms_epsilon");
  const double teps = target.get_f32_or("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  auto tensor = [](const GgufFile& f, const std::string& name) {
    const GgufTensorInfo& t = f.require_tensor(name);
    std::vector<float> v(t.n_elements());
    dequantize_to_f32(t.type, t.data, v.data(), v.size());
    return std::vector<double>(v.begin(), v.end());
  };
  auto rms = [](const double* x, const std::vector<double>& w, double* o, int len, double e) {
    double ss = 0;
    for (int i = 0; i < len; ++i) ss += x[i] * x[i];
    const double r = 1.0 / std::sqrt(ss / len + e);
    for (int i = 0; i < len; ++i) o[i] = x[i] * r * w[static_cast<size_t>(i)];
  };
  auto lin = [](const std::vector<double>& W, const double* x, int n_in, int n_out, double* y) {
    for (int o = 0; o < n_out; ++o) {
      double acc = 0;
      for (int i = 0; i < n_in; ++i) acc += W[static_cast<size_t>(o) * static_cast<size_t>(n_in) + static_cast<size_t>(i)] * x[i];
      y[o] = acc;
    }
  };
  auto rope = [&](double* v, int heads, int pos) {  // adjacent pairs (llama)
    for (int hh = 0; hh < heads; ++hh) {
      for (int i = 0; i < hd / 2; ++i) {
        const double ang = pos * std::pow(theta, -2.0 * i / hd);
        double* x = v + hh * hd + 2 * i;
        const double a = x[0], b = x[1];
        x[0] = a * std::cos(ang) - b * std::sin(ang);
        x[1] = a * std::sin(ang) + b * std::cos(ang);
      }
    }
  };
  const auto E = tensor(target, "token_embd.weight"), on = tensor(target, "output_norm.weight");
  const auto W = target.tensor("output.weight") ? tensor(target, "output.weight") : E;
  const int nv = static_cast<int>(E.size() / static_cast<size_t>(d));
  const auto eh = tensor(head, "blk.0.nextn.eh_proj.weight"), en = tensor(head, "blk.0.nextn.enorm.weight"),
             hn = tensor(head, "blk.0.nextn.hnorm.weight"), an = tensor(head, "blk.0.attn_norm.weight"),
             wq = tensor(head, "blk.0.attn_q.weight"), wk = tensor(head, "blk.0.attn_k.weight"),
             wv = tensor(head, "blk.0.attn_v.weight"), wo = tensor(head, "blk.0.attn_output.weight"),
             fn = tensor(head, "blk.0.ffn_norm.weight"), wg = tensor(head, "blk.0.ffn_gate.weight"),
             wu = tensor(head, "blk.0.ffn_up.weight"), wd = tensor(head, "blk.0.ffn_down.weight");
  const int n = static_cast<int>(tok.size()), nq = nh * hd, nkv = nkvh * hd;
  std::vector<double> K(static_cast<size_t>(n * nkv)), V(K.size()), G(static_cast<size_t>(n * d)),
      logits(static_cast<size_t>(n) * static_cast<size_t>(nv));
  std::vector<double> cat(static_cast<size_t>(2 * d)), x(static_cast<size_t>(d)), xb(static_cast<size_t>(d)),
      q(static_cast<size_t>(nq)), att(static_cast<size_t>(nq)), tmp(static_cast<size_t>(d)), ga(static_cast<size_t>(ff)),
      up(static_cast<size_t>(ff)), e(static_cast<size_t>(d)), hin(static_cast<size_t>(d));
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < d; ++i) {
      e[static_cast<size_t>(i)] = E[static_cast<size_t>(tok[static_cast<size_t>(r)]) * static_cast<size_t>(d) + static_cast<size_t>(i)];
      hin[static_cast<size_t>(i)] = h[static_cast<size_t>(r)].empty() ? G[static_cast<size_t>((r - 1) * d + i)]
                                                                       : h[static_cast<size_t>(r)][static_cast<size_t>(i)];
    }
    rms(e.data(), en, cat.data(), d, eps);
    rms(hin.data(), hn, cat.data() + d, d, eps);
    lin(eh, cat.data(), 2 * d, d, x.data());
    rms(x.data(), an, xb.data(), d, eps);
    lin(wq, xb.data(), d, nq, q.data());
    lin(wk, xb.data(), d, nkv, &K[static_cast<size_t>(r * nkv)]);
    lin(wv, xb.data(), d, nkv, &V[static_cast<size_t>(r * nkv)]);
    rope(q.data(), nh, r);
    rope(&K[static_cast<size_t>(r * nkv)], nkvh, r);
    for (int hh = 0; hh < nh; ++hh) {
      const int kvh = hh / (nh / nkvh);
      std::vector<double> sc(static_cast<size_t>(r) + 1);
      double mx = -1e300;
      for (int s = 0; s <= r; ++s) {
        double dot = 0;
        for (int i = 0; i < hd; ++i) dot += q[static_cast<size_t>(hh * hd + i)] * K[static_cast<size_t>(s * nkv + kvh * hd + i)];
        sc[static_cast<size_t>(s)] = dot / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, sc[static_cast<size_t>(s)]);
      }
      double sum = 0;
      for (double& v : sc) sum += (v = std::exp(v - mx));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (int s = 0; s <= r; ++s) acc += sc[static_cast<size_t>(s)] * V[static_cast<size_t>(s * nkv + kvh * hd + i)];
        att[static_cast<size_t>(hh * hd + i)] = acc / sum;
      }
    }
    lin(wo, att.data(), nq, d, tmp.data());
    for (int i = 0; i < d; ++i) x[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
    rms(x.data(), fn, xb.data(), d, eps);
    lin(wg, xb.data(), d, ff, ga.data());
    lin(wu, xb.data(), d, ff, up.data());
    for (int i = 0; i < ff; ++i) {
      const double gv = ga[static_cast<size_t>(i)];
      ga[static_cast<size_t>(i)] = gv / (1 + std::exp(-gv)) * up[static_cast<size_t>(i)];
    }
    lin(wd, ga.data(), ff, d, tmp.data());
    for (int i = 0; i < d; ++i) {
      x[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
      G[static_cast<size_t>(r * d + i)] = x[static_cast<size_t>(i)];
    }
    rms(x.data(), on, xb.data(), d, teps);
    lin(W, xb.data(), d, nv, &logits[static_cast<size_t>(r) * static_cast<size_t>(nv)]);
  }
  if (g_out) *g_out = G;
  return logits;
}

}  // namespace specchat::test
