#include "engine/model.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/ops.h"

namespace specchat {

// Weights as f32 in memory, PyTorch layout: a matrix [n_out, n_in] (GGUF ne = {n_in, n_out}).
struct LlamaModel::Weights {
  struct Layer {
    std::vector<float> attn_norm;  // [d_model]
    std::vector<float> wq;         // [n_head * head_dim, d_model]
    std::vector<float> wk, wv;     // [n_head_kv * head_dim, d_model]
    std::vector<float> wo;         // [d_model, n_head * head_dim]
    std::vector<float> ffn_norm;   // [d_model]
    std::vector<float> w_gate, w_up;  // [d_ff, d_model]
    std::vector<float> w_down;     // [d_model, d_ff]
  };
  std::vector<float> tok_embd;     // [n_vocab, d_model]
  std::vector<Layer> layers;       // [n_layer]
  std::vector<float> output_norm;  // [d_model]
  std::vector<float> output;       // [n_vocab, d_model] (a copy of tok_embd when tied)
  size_t bytes() const {
    size_t n = tok_embd.size() + output_norm.size() + output.size();
    for (const auto& l : layers) {
      n += l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() +
           l.ffn_norm.size() + l.w_gate.size() + l.w_up.size() + l.w_down.size();
    }
    return n * sizeof(float);
  }
};

// Activations for the largest batch, allocated once (no allocation in the decode loop).
struct LlamaModel::Scratch {
  std::vector<float> x, xb, q, k, v, att, gate, up, logits, att_scores;
  std::vector<uint8_t> visible;
};

namespace {

std::vector<float> load_tensor(const GgufFile& f, const std::string& name,
                               const std::vector<uint64_t>& ne) {
  const GgufTensorInfo& t = f.require_tensor(name, ne);
  std::vector<float> out(t.n_elements());
  dequantize_to_f32(t.type, t.data, out.data(), t.n_elements());
  return out;
}

}  // namespace

Batch Batch::chain(std::span<const int32_t> toks, int start, bool all_logits) {
  Batch b;
  const int n = static_cast<int>(toks.size());
  b.tokens.assign(toks.begin(), toks.end());
  b.kv_pos0 = start;
  for (int i = 0; i < n; ++i) {
    b.pos.push_back(start + i);
    b.parent.push_back(i - 1);
  }
  if (all_logits) {
    for (int i = 0; i < n; ++i) b.out_rows.push_back(i);
  } else if (n > 0) {
    b.out_rows.push_back(n - 1);
  }
  return b;
}

LlamaModel::~LlamaModel() = default;

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const Options& opt) {
  GgufFile f = GgufFile::open(path);
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->path_ = path;
  m->cfg_ = ModelConfig::from_gguf(f);
  m->vocab_ = Vocab::from_gguf(f);
  ModelConfig& c = m->cfg_;
  c.n_vocab = m->vocab_.size();
  const uint64_t d = static_cast<uint64_t>(c.d_model), hd = static_cast<uint64_t>(c.head_dim);
  const uint64_t nq = static_cast<uint64_t>(c.n_head) * hd, nkv = static_cast<uint64_t>(c.n_head_kv) * hd;
  const uint64_t ff = static_cast<uint64_t>(c.d_ff), nv = static_cast<uint64_t>(c.n_vocab);
  auto w = std::make_unique<Weights>();
  try {
    w->tok_embd = load_tensor(f, "token_embd.weight", {d, nv});
    w->output_norm = load_tensor(f, "output_norm.weight", {d});
    w->output = f.tensor("output.weight") ? load_tensor(f, "output.weight", {d, nv}) : w->tok_embd;
    for (int il = 0; il < c.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      Weights::Layer l;
      l.attn_norm = load_tensor(f, p + "attn_norm.weight", {d});
      l.wq = load_tensor(f, p + "attn_q.weight", {d, nq});
      l.wk = load_tensor(f, p + "attn_k.weight", {d, nkv});
      l.wv = load_tensor(f, p + "attn_v.weight", {d, nkv});
      l.wo = load_tensor(f, p + "attn_output.weight", {nq, d});
      l.ffn_norm = load_tensor(f, p + "ffn_norm.weight", {d});
      l.w_gate = load_tensor(f, p + "ffn_gate.weight", {d, ff});
      l.w_up = load_tensor(f, p + "ffn_up.weight", {d, ff});
      l.w_down = load_tensor(f, p + "ffn_down.weight", {ff, d});
      w->layers.push_back(std::move(l));
    }
  } catch (const GgufError& e) {
    throw ModelError(std::string(e.what()));
  }
  m->w_ = std::move(w);
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : c.n_ctx_train;
  m->max_batch_ = std::max(1, opt.max_batch);
  m->kv_ = KvCache(c.n_layer, n_ctx, static_cast<int>(nkv));
  auto s = std::make_unique<Scratch>();
  const size_t B = static_cast<size_t>(m->max_batch_);
  s->x.resize(B * d);
  s->xb.resize(B * d);
  s->q.resize(B * nq);
  s->k.resize(B * nkv);
  s->v.resize(B * nkv);
  s->att.resize(B * nq);
  s->gate.resize(B * ff);
  s->up.resize(B * ff);
  s->logits.resize(B * nv);
  s->att_scores.resize(static_cast<size_t>(n_ctx) + B);
  s->visible.resize(B * (static_cast<size_t>(n_ctx) + B));
  m->s_ = std::move(s);
  cpu::set_num_threads(opt.n_threads);
  return m;
}

std::span<const float> LlamaModel::sync_cache(std::span<const int32_t> ctx, int upto, bool want_logits) {
  if (upto <= 0 || upto > static_cast<int>(ctx.size()) || upto > kv_.n_ctx()) {
    throw std::invalid_argument("sync_cache: upto out of range");
  }
  int keep = std::min(kv_.common_prefix(ctx.first(static_cast<size_t>(upto))), want_logits ? upto - 1 : upto);
  kv_.truncate(keep);
  std::span<const float> logits;
  while (keep < upto) {
    const int len = std::min(upto - keep, max_batch_);
    const auto part = ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len));
    logits = forward(Batch::chain(part, keep, false));
    kv_.commit(part);
    keep += len;
  }
  return want_logits ? logits : std::span<const float>();
}

size_t LlamaModel::weight_bytes() const { return w_ ? w_->bytes() : 0; }

std::span<const float> LlamaModel::forward(const Batch& b) {
  const ModelConfig& c = cfg_;
  const int n = static_cast<int>(b.tokens.size());
  if (n == 0) throw std::invalid_argument("forward: empty batch");
  if (n > max_batch_) throw std::invalid_argument("forward: batch larger than max_batch");
  if (b.pos.size() != b.tokens.size() || b.parent.size() != b.tokens.size()) {
    throw std::invalid_argument("forward: tokens/pos/parent sizes differ");
  }
  if (b.kv_pos0 < 0 || b.kv_pos0 + n > kv_.n_ctx()) {
    throw std::invalid_argument("forward: batch does not fit the KV cache (n_ctx " +
                                std::to_string(kv_.n_ctx()) + ")");
  }
  Scratch& s = *s_;
  const int d = c.d_model, hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  const int n_prefix = b.n_prefix < 0 ? b.kv_pos0 : b.n_prefix;
  if (n_prefix > b.kv_pos0) throw std::invalid_argument("forward: n_prefix past kv_pos0");
  if (!b.parent_slot.empty() && b.parent_slot.size() != b.tokens.size()) {
    throw std::invalid_argument("forward: parent_slot size differs from tokens");
  }
  // Embedding gather, slot links and the visibility mask (tree attention): token i sees the
  // shared prefix, itself and its ancestors, in this batch or in earlier tree slots.
  const int n_masked = b.kv_pos0 + n - n_prefix;
  std::fill(s.visible.begin(), s.visible.begin() + static_cast<size_t>(n) * n_masked, 0);
  for (int i = 0; i < n; ++i) {
    const int32_t t = b.tokens[i];
    if (t < 0 || t >= c.n_vocab) throw std::invalid_argument("forward: token id out of range");
    if (b.parent[i] >= i || b.parent[i] < -1) throw std::invalid_argument("forward: bad parent link");
    const int32_t ps = b.parent_slot.empty() ? -1 : b.parent_slot[i];
    if (ps != -1 && (b.parent[i] != -1 || ps < n_prefix || ps >= b.kv_pos0)) {
      throw std::invalid_argument("forward: bad parent_slot link");
    }
    std::copy_n(w_->tok_embd.data() + static_cast<size_t>(t) * d, d, s.x.data() + static_cast<size_t>(i) * d);
    const int slot = b.kv_pos0 + i;
    kv_.set_slot_parent(slot, b.parent[i] >= 0 ? b.kv_pos0 + b.parent[i] : ps);
    uint8_t* vis = s.visible.data() + static_cast<size_t>(i) * n_masked;
    for (int sl = slot; sl >= n_prefix; sl = kv_.slot_parent(sl)) vis[sl - n_prefix] = 1;
  }
  for (int r : b.out_rows) {
    if (r < 0 || r >= n) throw std::invalid_argument("forward: out_rows index out of range");
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const Weights::Layer& l = w_->layers[static_cast<size_t>(il)];
    cpu::rmsnorm(s.x.data(), l.attn_norm.data(), s.xb.data(), n, d, c.norm_eps);
    cpu::matmul(s.xb.data(), l.wq.data(), s.q.data(), n, d, nq);
    cpu::matmul(s.xb.data(), l.wk.data(), s.k.data(), n, d, nkv);
    cpu::matmul(s.xb.data(), l.wv.data(), s.v.data(), n, d, nkv);
    cpu::rope(s.q.data(), b.pos.data(), n, c.n_head, hd, c.rope_theta);
    cpu::rope(s.k.data(), b.pos.data(), n, c.n_head_kv, hd, c.rope_theta);
    for (int i = 0; i < n; ++i) {
      std::copy_n(s.k.data() + static_cast<size_t>(i) * nkv, nkv, kv_.k(il, b.kv_pos0 + i));
      std::copy_n(s.v.data() + static_cast<size_t>(i) * nkv, nkv, kv_.v(il, b.kv_pos0 + i));
    }
    cpu::AttentionArgs a{};
    a.q = s.q.data();
    a.k_cache = kv_.k(il, 0);
    a.v_cache = kv_.v(il, 0);
    a.kv_stride = nkv;
    a.kv_pos0 = b.kv_pos0;
    a.n_prefix = n_prefix;
    a.n_tokens = n;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim = hd;
    a.visible = s.visible.data();
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
    cpu::rmsnorm(s.x.data() + static_cast<size_t>(b.out_rows[j]) * d, w_->output_norm.data(),
                 s.xb.data() + static_cast<size_t>(j) * d, 1, d, c.norm_eps);
  }
  if (n_out > 0) cpu::matmul(s.xb.data(), w_->output.data(), s.logits.data(), n_out, d, c.n_vocab);
  return {s.logits.data(), static_cast<size_t>(n_out) * c.n_vocab};
}

}  // namespace specchat
