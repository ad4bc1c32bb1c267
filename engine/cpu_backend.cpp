#include "engine/cpu_backend.h"

#include "engine/op_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/backend_weights.h"
#include "engine/gguf.h"
#include "engine/panel_arena.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specchat {

size_t CpuBackend::Scratch::bytes() const {
  return (x.size() + xb.size() + q.size() + k.size() + v.size() + att.size() + gate.size() + up.size() +
          logits.size() + att_scores.size() + hidden.size()) * sizeof(float);
}

CpuBackend::CpuBackend(const ModelConfig& c, const BackendShape& sh, Weights w)
    : cfg_(c), w_(std::move(w)), act_(sh.activations) {
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
  // Every layer and the final norm at once is the most a forward can ask for.
  max_hidden_ = c.n_layer + 1;
  s_.hidden.resize(static_cast<size_t>(max_hidden_) * B * d);
  cpu::set_num_threads(sh.n_threads);
  pool_ = sh.pool ? sh.pool : std::make_shared<cpu::ThreadPool>(sh.n_threads);
  att_parts_.reserve(static_cast<size_t>(std::max(1, sh.n_seq)));
  // Positions never exceed n_ctx − 1 (a token's position is at most its slot): one table, built
  // once, instead of pow/cos/sin per token and layer.
  rope_.n_rot = c.n_rot();
  rope_.theta = c.rope_theta;
  rope_.freq_scale = c.rope_freq_scale;
  rope_.freq_factors = w_.rope_freqs.empty() ? nullptr : w_.rope_freqs.data();
  rope_.neox = c.rope_mode == RopeMode::neox;
  const size_t n_tab = static_cast<size_t>(std::max(1, sh.n_ctx)) * static_cast<size_t>(rope_.n_rot / 2);
  rope_cos_.resize(n_tab);
  rope_sin_.resize(n_tab);
  cpu::rope_table(std::max(1, sh.n_ctx), rope_, rope_cos_.data(), rope_sin_.data());
}

MemoryInfo CpuBackend::memory() const {
  MemoryInfo m;
  m.weights_bytes = w_.bytes;
  m.activation_bytes = s_.bytes();
  bool blocks = dtype_is_block(w_.output.type);
  for (const Weights::Layer& l : w_.layers) {
    for (const WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      blocks = blocks || dtype_is_block(v->type);
    }
  }
  m.q8_activations = blocks && act_ == cpu::Activations::q8;
  m.packed_bytes = w_.packed_bytes;
  return m;
}


namespace {
// x[rows, n] += bias[n] per row.
void add_bias(float* x, const float* bias, int rows, int n) {
  for (int r = 0; r < rows; ++r) {
    float* xr = x + static_cast<size_t>(r) * static_cast<size_t>(n);
    for (int i = 0; i < n; ++i) xr[i] += bias[i];
  }
}
}  // namespace

bool CpuBackend::set_profile(OpProfile* p) {
  prof_ = p;
  if (p) name_profile_ops(*p, cfg_);
  return true;
}

ForwardOut CpuBackend::forward(const ForwardArgs& b) {
  const ModelConfig& c = cfg_;
  OpProfile* const P = prof_;
  if (P) {
    ++P->forwards;
    P->rows += static_cast<long>(b.tokens.size());
  }
  Scratch& s = s_;
  const int n = static_cast<int>(b.tokens.size());
  const int d = c.d_model, hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  const int n_out = static_cast<int>(b.out_rows.size());
  const int n_hidden = static_cast<int>(b.hidden_layers.size());
  auto job = [this](const float* x, const WeightView& w, float* y, int rows) { return linear_job(x, w, y, rows, act_); };
  auto mm = [&](const float* x, const WeightView& w, float* y, int rows) { linear_view(x, w, y, rows, pool_.get(), act_); };
  if (n_hidden > max_hidden_) throw std::invalid_argument("forward: too many hidden-state layers requested");
  const std::span<const int32_t> hrows = b.hidden_rows.empty() ? b.out_rows : b.hidden_rows;
  const int n_hid = static_cast<int>(hrows.size());
  if (!b.hidden_rows.empty() &&
      std::find(b.hidden_layers.begin(), b.hidden_layers.end(), kHiddenFinalNorm) != b.hidden_layers.end()) {
    throw std::invalid_argument("forward: the final norm's output is returned for out rows only");
  }
  // Where each requested layer's hidden rows go (−1: not requested).
  auto save_hidden = [&](int il) {
    for (int h = 0; h < n_hidden; ++h) {
      if (b.hidden_layers[static_cast<size_t>(h)] != il) continue;
      float* dst = s.hidden.data() + static_cast<size_t>(h) * n_hid * d;
      for (int j = 0; j < n_hid; ++j) {
        std::copy_n(s.x.data() + static_cast<size_t>(hrows[static_cast<size_t>(j)]) * d, d,
                    dst + static_cast<size_t>(j) * d);
      }
    }
  };
  {
  const OpTimer t_embed(P, OpProfile::embed);
  if (!b.embd.empty()) std::copy(b.embd.begin(), b.embd.end(), s.x.begin());
  for (int i = 0; i < n && b.embd.empty(); ++i) {
    const int64_t off = static_cast<int64_t>(b.tokens[static_cast<size_t>(i)]) * d;
    float* dst = s.x.data() + static_cast<size_t>(i) * d;
    // Block types: the row is whole blocks (d_model is checked against the block size at load).
    const auto* row = static_cast<const uint8_t*>(w_.tok_embd.data) +
                      static_cast<int64_t>(dtype_row_bytes(w_.tok_embd.type, static_cast<uint64_t>(off)));
    cpu::dequantize_row_ref(w_.tok_embd.type, row, dst, d);
  }
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const Weights::Layer& l = w_.layers[static_cast<size_t>(il)];
    {
      const OpTimer t(P, OpProfile::norm);
      cpu::rmsnorm(s.x.data(), l.attn_norm, s.xb.data(), n, d, c.norm_eps);
    }
    {  // Q, K and V in one pool region
      const OpTimer t(P, OpProfile::matmul_qkv);
      const cpu::LinearJob qkv[3] = {job(s.xb.data(), l.wq, s.q.data(), n), job(s.xb.data(), l.wk, s.k.data(), n),
                                     job(s.xb.data(), l.wv, s.v.data(), n)};
      cpu::linear_multi(qkv, pool_.get());
    }
    if (l.bq) {  // qwen2: Q/K/V biases
      const OpTimer t(P, OpProfile::bias);
      add_bias(s.q.data(), l.bq, n, nq);
      add_bias(s.k.data(), l.bk, n, nkv);
      add_bias(s.v.data(), l.bv, n, nkv);
    }
    if (l.q_norm) {  // qwen3: RMSNorm over each head of Q and K (in place)
      const OpTimer t(P, OpProfile::norm);
      cpu::rmsnorm(s.q.data(), l.q_norm, s.q.data(), n * c.n_head, hd, c.norm_eps);
      cpu::rmsnorm(s.k.data(), l.k_norm, s.k.data(), n * c.n_head_kv, hd, c.norm_eps);
    }
    {
      const OpTimer t(P, OpProfile::rope);
      cpu::rope_with_table(s.q.data(), b.pos.data(), n, c.n_head, hd, rope_, rope_cos_.data(), rope_sin_.data());
      cpu::rope_with_table(s.k.data(), b.pos.data(), n, c.n_head_kv, hd, rope_, rope_cos_.data(), rope_sin_.data());
    }
    // Per sequence: its rows' K/V into its cache, then attention over its own slots only (all
    // sequences in one parallel region).
    att_parts_.clear();
    for (const SeqSegment& sg : b.segments) {
      KvCache& kv = *sg.kv;
      {
        const OpTimer t(P, OpProfile::kv_write);
        const size_t r0 = static_cast<size_t>(sg.row0) * nkv;
        kv.write(il, sg.kv_pos0, s.k.data() + r0, s.v.data() + r0, sg.n_rows, nkv);
      }
      cpu::AttentionArgs a{};
      a.q = s.q.data() + static_cast<size_t>(sg.row0) * nq;
      if (kv.type() == DType::f16) {
        a.k_cache16 = static_cast<const uint16_t*>(kv.k_row(il, 0));
        a.v_cache16 = static_cast<const uint16_t*>(kv.v_row(il, 0));
      } else {
        a.k_cache = kv.k(il, 0);
        a.v_cache = kv.v(il, 0);
      }
      a.kv_stride = nkv;
      a.kv_pos0 = sg.kv_pos0;
      a.n_prefix = sg.n_prefix;
      a.n_tokens = sg.n_rows;
      a.n_head = c.n_head;
      a.n_head_kv = c.n_head_kv;
      a.head_dim = hd;
      a.visible = sg.visible;
      a.out = s.att.data() + static_cast<size_t>(sg.row0) * nq;
      a.scratch = s.att_scores.data();
      att_parts_.push_back(a);
    }
    {
      const OpTimer t(P, OpProfile::attention);
      cpu::attention_multi(att_parts_.data(), static_cast<int>(att_parts_.size()), pool_.get());
    }
    {
      const OpTimer t(P, OpProfile::matmul_o);
      mm(s.att.data(), l.wo, s.xb.data(), n);
    }
    {
      const OpTimer t(P, OpProfile::residual);
      cpu::add_inplace(s.x.data(), s.xb.data(), static_cast<int64_t>(n) * d);
    }
    {
      const OpTimer t(P, OpProfile::norm);
      cpu::rmsnorm(s.x.data(), l.ffn_norm, s.xb.data(), n, d, c.norm_eps);
    }
    {  // gate and up in one pool region
      const OpTimer t(P, OpProfile::matmul_gate_up);
      const cpu::LinearJob gu[2] = {job(s.xb.data(), l.w_gate, s.gate.data(), n), job(s.xb.data(), l.w_up, s.up.data(), n)};
      cpu::linear_multi(gu, pool_.get());
    }
    {
      const OpTimer t(P, OpProfile::swiglu);
      cpu::swiglu(s.gate.data(), s.up.data(), s.gate.data(), static_cast<int64_t>(n) * c.d_ff);
    }
    {
      const OpTimer t(P, OpProfile::matmul_down);
      mm(s.gate.data(), l.w_down, s.xb.data(), n);
    }
    {
      const OpTimer t(P, OpProfile::residual);
      cpu::add_inplace(s.x.data(), s.xb.data(), static_cast<int64_t>(n) * d);
    }
    if (n_hidden > 0) {
      const OpTimer t(P, OpProfile::hidden_copy);
      save_hidden(il);
    }
  }
  // Final norm and output projection only for the requested rows.
  {
    const OpTimer t(P, OpProfile::norm);
    for (int j = 0; j < n_out; ++j) {
      cpu::rmsnorm(s.x.data() + static_cast<size_t>(b.out_rows[static_cast<size_t>(j)]) * d, w_.output_norm,
                   s.xb.data() + static_cast<size_t>(j) * d, 1, d, c.norm_eps);
    }
  }
  for (int h = 0; h < n_hidden; ++h) {
    if (b.hidden_layers[static_cast<size_t>(h)] != kHiddenFinalNorm) continue;
    std::copy_n(s.xb.data(), static_cast<size_t>(n_out) * d, s.hidden.data() + static_cast<size_t>(h) * n_out * d);
  }
  if (n_out > 0) {
    const OpTimer t(P, OpProfile::matmul_head);
    mm(s.xb.data(), w_.output, s.logits.data(), n_out);
  }
  ForwardOut out;
  out.logits = {s.logits.data(), static_cast<size_t>(n_out) * c.n_vocab};
  out.hidden = {s.hidden.data(), static_cast<size_t>(n_hidden) * n_hid * d};
  return out;
}

namespace {

// Views a GGUF matrix in place, in its file type (every type the reader loads has kernels).
WeightView view_matrix(const GgufTensorInfo& t) {
  WeightView v;
  v.n_in = static_cast<int>(t.ne[0]);
  v.n_out = static_cast<int>(t.ne.size() > 1 ? t.ne[1] : 1);
  v.type = t.type;
  v.data = t.data;
  return v;
}

// Norm weights are read as f32: in place when the file holds f32, else converted.
const float* view_norm(const GgufTensorInfo& t, CpuBackend::Weights& w) {
  if (t.type == GgmlType::f32) return reinterpret_cast<const float*>(t.data);
  const uint64_t n = t.n_elements();
  w.owned_f32.emplace_back(new float[n]);
  dequantize_to_f32(t.type, t.data, w.owned_f32.back().get(), n);
  return w.owned_f32.back().get();
}

// Repacks every F16/BF16 matrix the products read (not the token embedding, which is read by
// rows) into panels (cpu::pack_panels) in one arena, w.packed; `f`, when given, releases the
// file's pages of each packed tensor. A tied LM head gets its own packed copy.
void pack_16bit(CpuBackend::Weights& w, const GgufFile* f, cpu::ThreadPool* pool) {
  std::vector<WeightView*> views;
  for (CpuBackend::Weights::Layer& l : w.layers) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) views.push_back(v);
  }
  views.push_back(&w.output);
  const PanelArena arena = pack_in_panels(views, pool, [&](const WeightView& v) {
    if (f && v.data != w.tok_embd.data) f->release_pages(v.data, v.bytes());
  });
  w.packed = arena.memory;
  w.packed_bytes = arena.bytes;
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s) {
  CpuBackend::Weights w;
  const LlamaTensorShapes sh(c);
  size_t bytes = 0;
  auto mat = [&](const std::string& name, const std::vector<uint64_t>& ne) {
    const WeightView v = view_matrix(f.require_tensor(name, ne));
    bytes += v.bytes();
    return v;
  };
  auto vec = [&](const std::string& name, const std::vector<uint64_t>& ne) {
    bytes += static_cast<size_t>(ne[0]) * sizeof(float);
    return view_norm(f.require_tensor(name, ne), w);
  };
  auto norm = [&](const std::string& name) { return vec(name, sh.norm); };
  try {
    check_tensor_names(f, c);
    if (c.rope_freqs) {
      const float* rf = vec("rope_freqs.weight", sh.rope_freqs);
      w.rope_freqs.assign(rf, rf + sh.rope_freqs[0]);
      for (float x : w.rope_freqs) {
        if (!(x > 0) || !std::isfinite(x)) {
          throw ModelError(f.path() + ": rope_freqs.weight holds a non-positive or non-finite frequency factor");
        }
      }
    }
    w.tok_embd = mat("token_embd.weight", sh.embd);
    w.output_norm = norm("output_norm.weight");
    w.output = f.tensor("output.weight") ? mat("output.weight", sh.embd) : w.tok_embd;
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = layer_prefix(il);
      CpuBackend::Weights::Layer l;
      l.attn_norm = norm(p + "attn_norm.weight");
      l.wq = mat(p + "attn_q.weight", sh.wq);
      l.wk = mat(p + "attn_k.weight", sh.wkv);
      l.wv = mat(p + "attn_v.weight", sh.wkv);
      l.wo = mat(p + "attn_output.weight", sh.wo);
      if (c.qkv_bias) {
        l.bq = vec(p + "attn_q.bias", sh.bq);
        l.bk = vec(p + "attn_k.bias", sh.bkv);
        l.bv = vec(p + "attn_v.bias", sh.bkv);
      }
      if (c.qk_norm) {
        l.q_norm = vec(p + "attn_q_norm.weight", sh.head_norm);
        l.k_norm = vec(p + "attn_k_norm.weight", sh.head_norm);
      }
      l.ffn_norm = norm(p + "ffn_norm.weight");
      l.w_gate = mat(p + "ffn_gate.weight", sh.w_up);
      l.w_up = mat(p + "ffn_up.weight", sh.w_up);
      l.w_down = mat(p + "ffn_down.weight", sh.w_down);
      w.layers.push_back(l);
    }
  } catch (const GgufError& e) {
    throw ModelError(std::string(e.what()));
  }
  w.bytes = bytes;
  BackendShape sp = s;
  if (!sp.pool) sp.pool = std::make_shared<cpu::ThreadPool>(s.n_threads);
  pack_16bit(w, &f, sp.pool.get());
  return std::make_unique<CpuBackend>(c, sp, std::move(w));
}

std::unique_ptr<Backend> make_cpu_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed) {
  // F16 values from the CUDA random_fill's CPU twin, kept as F16: the same model as
  // make_cuda_backend_random builds on the device (backend_weights.h).
  const LlamaTensorShapes sh(c);
  size_t index = 0;
  CpuBackend::Weights w;
  auto mat = [&](const std::vector<uint64_t>& ne) {
    const int64_t n = static_cast<int64_t>(ne[0] * ne[1]);
    w.owned_16.emplace_back(new uint16_t[static_cast<size_t>(n)]);
    cpu::random_fill(w.owned_16.back().get(), DType::f16, n, random_tensor_seed(seed, index++),
                     random_tensor_amplitude(ne[0]));
    WeightView v{w.owned_16.back().get(), DType::f16, static_cast<int>(ne[1]), static_cast<int>(ne[0])};
    w.bytes += v.bytes();
    return v;
  };
  auto ones = [&]() {
    ++index;
    w.owned_f32.emplace_back(new float[sh.norm[0]]);
    std::fill_n(w.owned_f32.back().get(), sh.norm[0], 1.0f);
    w.bytes += sh.norm[0] * sizeof(float);
    return static_cast<const float*>(w.owned_f32.back().get());
  };
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
    w.layers.push_back(l);
  }
  BackendShape sp = s;
  if (!sp.pool) sp.pool = std::make_shared<cpu::ThreadPool>(s.n_threads);
  pack_16bit(w, nullptr, sp.pool.get());
  // The row-major copies the panels replaced (the embedding's stays: it is read by rows). Only
  // when they were packed: packing off (or skipped) leaves the views on these buffers.
  if (w.packed) {
    std::erase_if(w.owned_16, [&](const std::unique_ptr<uint16_t[]>& b) { return b.get() != w.tok_embd.data; });
  }
  return std::make_unique<CpuBackend>(c, sp, std::move(w));
}

}  // namespace specchat
