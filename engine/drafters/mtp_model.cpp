#include "engine/drafters/mtp_model.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <set>
#include <stdexcept>

#include "engine/drafters/sha256.h"
#include "engine/model.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/ops.h"

namespace specchat {

namespace {

constexpr const char* kArch = "specchat-mtp";

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

[[noreturn]] void refuse(DrafterBindErrorKind kind, const std::string& path, const std::string& what) {
  throw DrafterBindError(kind, path + ": " + what);
}

std::vector<float> to_f32(const GgufTensorInfo& t) {
  std::vector<float> v(t.n_elements());
  dequantize_to_f32(t.type, t.data, v.data(), v.size());
  return v;
}

}  // namespace

MtpModel::~MtpModel() = default;

std::shared_ptr<const MtpModel> MtpModel::load(const std::string& path, const LlamaModel& target,
                                               const Options& opt) {
  using K = DrafterBindErrorKind;
  std::shared_ptr<MtpModel> m(new MtpModel());
  m->path_ = path;
  m->pool_ = opt.pool;
  m->file_ = std::make_unique<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *m->file_;
  const ModelConfig& tc = target.config();
  auto fail = [&](K kind, const std::string& what) { refuse(kind, path, what); };

  const std::string arch = f.get_string("general.architecture");
  if (arch != kArch) fail(K::wrong_architecture, "general.architecture is '" + arch + "', not '" + kArch + "'");
  // Every specchat-mtp.* key changes the computation or is refused by name (never ignored).
  const std::string A = std::string(kArch) + ".";
  static const std::set<std::string> known = {
      "block_count", "embedding_length", "feed_forward_length", "attention.head_count",
      "attention.head_count_kv", "attention.key_length", "attention.value_length", "rope.freq_base",
      "rope.dimension_count", "attention.layer_norm_rms_epsilon", "context_length", "vocab_size"};
  for (const auto& [key, v] : f.metadata()) {
    if (key.rfind(A, 0) == 0 && !known.count(key.substr(A.size()))) {
      fail(K::unsupported, "key '" + key + "' is not one SpecChat runs");
    }
  }
  if (f.get_u32(A + "block_count") != 1) {
    fail(K::unsupported, A + "block_count is " + std::to_string(f.get_u32(A + "block_count")) + ", the head has 1 layer");
  }
  MtpConfig& c = m->cfg_;
  c.d_model = static_cast<int>(f.get_u32(A + "embedding_length"));
  if (c.d_model != tc.d_model) {
    fail(K::wrong_width, A + "embedding_length is " + std::to_string(c.d_model) + ", the target's width is " +
                             std::to_string(tc.d_model) + " (" + target.path() + ")");
  }
  c.d_ff = static_cast<int>(f.get_u32(A + "feed_forward_length"));
  c.n_head = static_cast<int>(f.get_u32(A + "attention.head_count"));
  c.n_head_kv = static_cast<int>(f.get_u32_or(A + "attention.head_count_kv", static_cast<uint32_t>(c.n_head)));
  if (c.n_head <= 0 || c.n_head_kv <= 0 || c.n_head % c.n_head_kv != 0 || c.d_ff <= 0 || c.n_head > 4096 ||
      c.d_ff > (1 << 20)) {
    fail(K::unsupported, "head counts " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
                             " or feed_forward_length " + std::to_string(c.d_ff) + " are not usable");
  }
  c.head_dim = static_cast<int>(f.get_u32_or(A + "attention.key_length", static_cast<uint32_t>(c.d_model / c.n_head)));
  if (f.get_u32_or(A + "attention.value_length", static_cast<uint32_t>(c.head_dim)) != static_cast<uint32_t>(c.head_dim)) {
    fail(K::unsupported, A + "attention.value_length differs from key_length");
  }
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > 1024) {
    fail(K::unsupported, "head_dim " + std::to_string(c.head_dim) + " is not usable");
  }
  if (f.get_u32_or(A + "rope.dimension_count", static_cast<uint32_t>(c.head_dim)) != static_cast<uint32_t>(c.head_dim)) {
    fail(K::unsupported, A + "rope.dimension_count differs from head_dim (partial RoPE is not run for the head)");
  }
  c.rope_theta = f.get_f32_or(A + "rope.freq_base", 10000.0f);
  c.norm_eps = f.get_f32_or(A + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.n_ctx_train = static_cast<int>(f.get_u32_or(A + "context_length", 0));
  c.n_vocab = tc.n_vocab;
  if (f.has(A + "vocab_size") && f.get_u32(A + "vocab_size") != static_cast<uint32_t>(tc.n_vocab)) {
    fail(K::vocab_mismatch, A + "vocab_size is " + std::to_string(f.get_u32(A + "vocab_size")) +
                                ", the target's vocabulary has " + std::to_string(tc.n_vocab));
  }

  // Binding keys (ours): what the head was trained against.
  if (f.has("specchat.target.n_vocab") && f.get_u32("specchat.target.n_vocab") != static_cast<uint32_t>(tc.n_vocab)) {
    fail(K::vocab_mismatch, "trained for a target vocabulary of " + std::to_string(f.get_u32("specchat.target.n_vocab")) +
                                " tokens, the target has " + std::to_string(tc.n_vocab));
  }
  if (f.has("specchat.target.architecture") && f.get_string("specchat.target.architecture") != tc.architecture) {
    fail(K::target_mismatch, "trained for a '" + f.get_string("specchat.target.architecture") + "' target, the target is '" +
                                 tc.architecture + "'");
  }
  // The target's file: its embedding, final norm and LM head.
  try {
    m->target_file_ = std::make_unique<GgufFile>(GgufFile::open(target.path()));
  } catch (const GgufError& e) {
    fail(K::target_unreadable, "the target's GGUF file cannot be read for its embedding and LM head: " +
                                   std::string(e.what()));
  }
  if (f.has("specchat.target.sha256")) {
    const std::string want = f.get_string("specchat.target.sha256");
    std::string got;
    try {
      got = sha256_file_hex(target.path());
    } catch (const std::runtime_error& e) {
      fail(K::sha256_mismatch, std::string("cannot check specchat.target.sha256: ") + e.what());
    }
    std::string w = want;
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    if (w != got) {
      fail(K::sha256_mismatch, "trained against a target with sha256 " + want + ", " + target.path() + " has " + got);
    }
  }

  // Tensors: every one the head uses, of the right shape; nothing else.
  const uint64_t d = static_cast<uint64_t>(c.d_model), hd = static_cast<uint64_t>(c.head_dim);
  const uint64_t nq = static_cast<uint64_t>(c.n_head) * hd, nkv = static_cast<uint64_t>(c.n_head_kv) * hd;
  const uint64_t ff = static_cast<uint64_t>(c.d_ff);
  std::set<std::string> used;
  auto need = [&](const GgufFile& file, const std::string& name, const std::vector<uint64_t>& ne,
                  const std::string& whose) -> const GgufTensorInfo& {
    used.insert(name);
    const GgufTensorInfo* t = file.tensor(name);
    if (!t) refuse(K::missing_tensor, path, whose + "tensor '" + name + "' is missing");
    if (t->ne != ne) {
      fail(K::wrong_width, whose + "tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " + shape_str(ne));
    }
    return *t;
  };
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const GgufTensorInfo& t = need(f, name, {n_in, n_out}, "");
    if (dtype_is_block(t.type) && n_in % static_cast<uint64_t>(dtype_block_size(t.type)) != 0) {
      fail(K::wrong_width, "tensor '" + name + "' rows are not whole " + ggml_type_name(t.type) + " blocks");
    }
    Mat v;
    v.data = t.data;
    v.type = t.type;
    v.n_in = static_cast<int>(n_in);
    v.n_out = static_cast<int>(n_out);
    return v;
  };
  auto norm = [&](const std::string& name) { return to_f32(need(f, name, {d}, "")); };
  m->eh_proj_ = mat("blk.0.nextn.eh_proj.weight", 2 * d, d);
  m->enorm_ = norm("blk.0.nextn.enorm.weight");
  m->hnorm_ = norm("blk.0.nextn.hnorm.weight");
  m->attn_norm_ = norm("blk.0.attn_norm.weight");
  m->wq_ = mat("blk.0.attn_q.weight", d, nq);
  m->wk_ = mat("blk.0.attn_k.weight", d, nkv);
  m->wv_ = mat("blk.0.attn_v.weight", d, nkv);
  m->wo_ = mat("blk.0.attn_output.weight", nq, d);
  m->ffn_norm_ = norm("blk.0.ffn_norm.weight");
  m->w_gate_ = mat("blk.0.ffn_gate.weight", d, ff);
  m->w_up_ = mat("blk.0.ffn_up.weight", d, ff);
  m->w_down_ = mat("blk.0.ffn_down.weight", ff, d);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!used.count(t.name)) {
      fail(K::unsupported, "tensor '" + t.name + "' is not used by the head (embedding, final norm and LM head are the target's)");
    }
  }

  const GgufFile& tf = *m->target_file_;
  const uint64_t nv = static_cast<uint64_t>(tc.n_vocab);
  const std::string tw = "target " + target.path() + ": ";
  const GgufTensorInfo& emb = need(tf, "token_embd.weight", {d, nv}, tw);
  m->tok_embd_ = emb.data;
  m->tok_embd_type_ = emb.type;
  m->output_norm_ = to_f32(need(tf, "output_norm.weight", {d}, tw));
  m->target_norm_eps_ = tc.norm_eps;
  const GgufTensorInfo* out = tf.tensor("output.weight");
  if (out && out->ne != std::vector<uint64_t>{d, nv}) {
    fail(K::vocab_mismatch, tw + "LM head 'output.weight' has shape " + shape_str(out->ne) + ", expected " + shape_str({d, nv}));
  }
  if (!out) out = &emb;
  // The LM head: the target's own packed panels when its CPU backend has them (shared, no copy),
  // else the row-major tensor in the target's file. The head's matrices are packed here.
  if (SharedWeight head = target.packed_lm_head(); head.keep) {
    m->output_ = head.view;
    m->head_keep_ = std::move(head.keep);
  } else {
    m->output_.data = out->data;
    m->output_.type = out->type;
    m->output_.n_in = static_cast<int>(d);
    m->output_.n_out = static_cast<int>(nv);
  }
  m->rope_n_pos_ = target.n_ctx() + 64;
  const size_t n_tab = static_cast<size_t>(m->rope_n_pos_) * static_cast<size_t>(c.head_dim / 2);
  m->rope_cos_.resize(n_tab);
  m->rope_sin_.resize(n_tab);
  cpu::rope_table(m->rope_n_pos_, c.head_dim, c.rope_theta, m->rope_cos_.data(), m->rope_sin_.data());
  WeightView* const mats[] = {&m->eh_proj_, &m->wq_, &m->wk_, &m->wv_, &m->wo_, &m->w_gate_, &m->w_up_, &m->w_down_};
  m->panels_ = pack_in_panels(mats, m->pool_.get(), [&](const WeightView& v) { f.release_pages(v.data, v.bytes()); });
  return m;
}

void MtpModel::linear(const float* x, const Mat& w, float* y, int n) const {
  linear_view(x, w, y, n, pool_.get());
}

void MtpModel::forward(std::span<const int32_t> next_token, const float* h, std::span<const int32_t> pos,
                       int n_prefix, const uint8_t* visible, MtpState& st, float* g) const {
  const int n = static_cast<int>(pos.size());
  if (n <= 0 || next_token.size() != pos.size()) {
    throw std::invalid_argument("MtpModel::forward: " + std::to_string(next_token.size()) + " tokens for " +
                                std::to_string(pos.size()) + " positions");
  }
  for (int32_t t : next_token) {
    if (t < 0 || t >= cfg_.n_vocab) throw std::invalid_argument("MtpModel::forward: token id " + std::to_string(t) + " out of range");
  }
  for (int32_t p : pos) {
    if (p < 0) throw std::invalid_argument("MtpModel::forward: negative position");
  }
  const int kv_pos0 = st.n;
  if (!visible) n_prefix = kv_pos0;
  if (n_prefix < 0 || n_prefix > kv_pos0) throw std::invalid_argument("MtpModel::forward: n_prefix out of range");
  const size_t d = static_cast<size_t>(cfg_.d_model), kvd = static_cast<size_t>(kv_dim()), un = static_cast<size_t>(n);
  const size_t nq = static_cast<size_t>(cfg_.n_head * cfg_.head_dim), ff = static_cast<size_t>(cfg_.d_ff);
  const float eps = cfg_.norm_eps;
  auto fit = [](std::vector<float>& v, size_t sz) {
    if (v.size() < sz) v.resize(sz);
    return v.data();
  };
  float* emb = fit(st.emb, un * d);
  float* cat = fit(st.cat, un * 2 * d);
  float* x = fit(st.u, un * d);
  float* xb = fit(st.xb, un * d);
  float* q = fit(st.q, un * nq);
  float* kk = fit(st.kk, un * kvd);
  float* vv = fit(st.vv, un * kvd);
  float* att = fit(st.att, un * nq);
  float* tmp = fit(st.tmp, un * d);
  float* gate = fit(st.gate, un * ff);
  float* up = fit(st.up, un * ff);

  // u = W_eh · [RMSNorm_e(emb(t_{i+1})); RMSNorm_h(h_i)]
  cpu::embedding_gather(tok_embd_, tok_embd_type_, next_token.data(), emb, n, cfg_.d_model);
  for (size_t r = 0; r < un; ++r) {
    cpu::rmsnorm(emb + r * d, enorm_.data(), cat + r * 2 * d, 1, cfg_.d_model, eps);
    cpu::rmsnorm(h + r * d, hnorm_.data(), cat + r * 2 * d + d, 1, cfg_.d_model, eps);
  }
  linear(cat, eh_proj_, x, n);

  // Attention block.
  cpu::rmsnorm(x, attn_norm_.data(), xb, n, cfg_.d_model, eps);
  {
    const cpu::LinearJob qkv[3] = {linear_job(xb, wq_, q, n),
                                   linear_job(xb, wk_, kk, n),
                                   linear_job(xb, wv_, vv, n)};
    cpu::linear_multi(qkv, pool_.get());
  }
  if (std::all_of(pos.begin(), pos.end(), [&](int32_t p) { return p < rope_n_pos_; })) {
    cpu::rope_with_table(q, pos.data(), n, cfg_.n_head, cfg_.head_dim, rope_cos_.data(), rope_sin_.data());
    cpu::rope_with_table(kk, pos.data(), n, cfg_.n_head_kv, cfg_.head_dim, rope_cos_.data(), rope_sin_.data());
  } else {
    cpu::rope(q, pos.data(), n, cfg_.n_head, cfg_.head_dim, cfg_.rope_theta);
    cpu::rope(kk, pos.data(), n, cfg_.n_head_kv, cfg_.head_dim, cfg_.rope_theta);
  }
  const size_t slots = static_cast<size_t>(kv_pos0) + un;
  if (st.k.size() < slots * kvd) {
    const size_t cap = std::max(slots, static_cast<size_t>(kv_pos0) * 2) * kvd;
    st.k.resize(cap);
    st.v.resize(cap);
  }
  std::copy(kk, kk + un * kvd, st.k.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(kv_pos0) * kvd));
  std::copy(vv, vv + un * kvd, st.v.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(kv_pos0) * kvd));
  if (!visible) {
    // Causal within the batch: row r sees batch rows 0..r (masked part = the batch).
    st.mask.assign(un * un, 0);
    for (size_t r = 0; r < un; ++r) std::fill(st.mask.begin() + static_cast<std::ptrdiff_t>(r * un),
                                              st.mask.begin() + static_cast<std::ptrdiff_t>(r * un + r + 1), uint8_t{1});
    visible = st.mask.data();
  }
  cpu::AttentionArgs a{};
  a.q = q;
  a.k_cache = st.k.data();
  a.v_cache = st.v.data();
  a.kv_stride = static_cast<int64_t>(kvd);
  a.kv_pos0 = kv_pos0;
  a.n_prefix = n_prefix;
  a.n_tokens = n;
  a.n_head = cfg_.n_head;
  a.n_head_kv = cfg_.n_head_kv;
  a.head_dim = cfg_.head_dim;
  a.visible = visible;
  a.out = att;
  a.scratch = nullptr;
  cpu::attention(a, pool_.get());
  st.n = kv_pos0 + n;
  linear(att, wo_, tmp, n);
  cpu::add_inplace(x, tmp, static_cast<int64_t>(un * d));

  // SwiGLU FFN.
  cpu::rmsnorm(x, ffn_norm_.data(), xb, n, cfg_.d_model, eps);
  {
    const cpu::LinearJob gu[2] = {
        linear_job(xb, w_gate_, gate, n),
        linear_job(xb, w_up_, up, n)};
    cpu::linear_multi(gu, pool_.get());
  }
  cpu::swiglu(gate, up, gate, static_cast<int64_t>(un * ff));
  linear(gate, w_down_, tmp, n);
  cpu::add_inplace(x, tmp, static_cast<int64_t>(un * d));
  std::copy(x, x + un * d, g);
}

void MtpModel::logits(const float* g, int n, float* out, MtpState& st) const {
  if (n <= 0) return;
  const size_t d = static_cast<size_t>(cfg_.d_model);
  if (st.xb.size() < static_cast<size_t>(n) * d) st.xb.resize(static_cast<size_t>(n) * d);
  cpu::rmsnorm(g, output_norm_.data(), st.xb.data(), n, cfg_.d_model, target_norm_eps_);
  linear(st.xb.data(), output_, out, n);
}

}  // namespace specchat
