// DFlashModel::load: reads a `general.architecture = dflash` GGUF and binds it to a target
// (docs/design/target-feature-drafters.md, "GGUF layout"). The forward is dflash_model.cpp.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "engine/backend_weights.h"
#include "engine/drafters/dflash_model.h"
#include "engine/drafters/sha256.h"
#include "engine/model.h"

namespace specchat {

namespace {

using Kind = DrafterBindErrorKind;

std::string dims(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// The dflash.* keys this loader reads; any other dflash.* key is refused (it would change the
// computation in a way we do not implement).
const std::set<std::string> kKnownKeys = {
    "block_count", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "attention.layer_norm_rms_epsilon", "rope.freq_base", "rope.dimension_count", "context_length",
    "block_size", "target_layers", "vocab_size"};

// Reads the dflash.* keys (GgufError missing_key / wrong_type become DrafterBindError).
struct KeyReader {
  const GgufFile& f;
  const std::string& path;
  std::string key(const std::string& k) const { return "dflash." + k; }
  int u32(const std::string& k) const {
    try {
      const uint32_t v = f.get_u32(key(k));
      if (v == 0 || v > (1u << 24)) throw DrafterBindError(Kind::bad_value, path + ": " + key(k) + " = " + std::to_string(v) + " is not a usable size");
      return static_cast<int>(v);
    } catch (const GgufError& e) {
      throw DrafterBindError(e.kind() == GgufErrorKind::missing_key ? Kind::missing_key : Kind::bad_value, e.what());
    }
  }
  int u32_or(const std::string& k, int fallback) const { return f.has(key(k)) ? u32(k) : fallback; }
  float f32_or(const std::string& k, float fallback) const {
    try {
      return f.get_f32_or(key(k), fallback);
    } catch (const GgufError& e) {
      throw DrafterBindError(Kind::bad_value, e.what());
    }
  }
};

// Norm weights as f32: in place when the file holds f32, else converted into `owned`.
const float* norm_f32(const GgufTensorInfo& t, std::vector<std::unique_ptr<float[]>>& owned) {
  if (t.type == DType::f32) return reinterpret_cast<const float*>(t.data);
  owned.emplace_back(new float[t.n_elements()]);
  dequantize_to_f32(t.type, t.data, owned.back().get(), t.n_elements());
  return owned.back().get();
}

[[noreturn]] void bind_fail(const std::string& path, Kind k, const std::string& why) {
  throw DrafterBindError(k, path + ": " + why);
}

WeightView view(const GgufTensorInfo& t) {
  WeightView v;
  v.data = t.data;
  v.type = t.type;
  v.n_in = static_cast<int>(t.ne[0]);
  v.n_out = static_cast<int>(t.ne.size() > 1 ? t.ne[1] : 1);
  return v;
}

}  // namespace

std::shared_ptr<const DFlashModel> DFlashModel::load(const std::string& path, const LlamaModel& target,
                                                      const DFlashOptions& opt) {
  std::shared_ptr<DFlashModel> m(new DFlashModel());
  m->path_ = path;
  m->file_ = std::make_unique<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *m->file_;
  const ModelConfig& tc = target.config();

  // --- Architecture and keys ---------------------------------------------------------------
  const std::string arch = f.get_string_or("general.architecture", "");
  if (arch != "dflash") {
    bind_fail(path, Kind::wrong_architecture, "general.architecture is '" + arch + "', not 'dflash' (a DFlash block drafter)");
  }
  for (const auto& [k, v] : f.metadata()) {
    if (k.rfind("dflash.", 0) != 0) continue;
    const std::string rest = k.substr(7);
    if (rest == "attention.sliding_window") {
      bind_fail(path, Kind::unsupported, "dflash.attention.sliding_window: sliding-window attention is not supported "
                              "(the engine's DFlash attends to every context row)");
    }
    if (!kKnownKeys.count(rest)) bind_fail(path, Kind::unsupported, "unknown key " + k + " (SpecChat does not run what it would change)");
  }
  const KeyReader keys{f, path};
  DFlashConfig& c = m->cfg_;
  c.n_layer = keys.u32("block_count");
  c.d_model = keys.u32("embedding_length");
  c.d_ff = keys.u32("feed_forward_length");
  c.n_head = keys.u32("attention.head_count");
  c.n_head_kv = keys.u32_or("attention.head_count_kv", c.n_head);
  if (c.d_model % c.n_head != 0 && !f.has("dflash.attention.key_length")) {
    bind_fail(path, Kind::bad_value, "embedding_length is not a multiple of head_count and key_length is absent");
  }
  c.head_dim = keys.u32_or("attention.key_length", c.d_model / c.n_head);
  c.n_ctx_train = keys.u32_or("context_length", 0);
  c.block_size = keys.u32("block_size");
  c.rope_theta = keys.f32_or("rope.freq_base", 10000.0f);
  c.norm_eps = keys.f32_or("attention.layer_norm_rms_epsilon", 1e-5f);
  if (keys.u32_or("attention.value_length", c.head_dim) != c.head_dim) {
    bind_fail(path, Kind::unsupported, "dflash.attention.value_length differs from key_length");
  }
  if (keys.u32_or("rope.dimension_count", c.head_dim) != c.head_dim) {
    bind_fail(path, Kind::unsupported, "dflash.rope.dimension_count differs from head_dim (partial rotary is not supported)");
  }
  if (c.n_head % c.n_head_kv != 0) bind_fail(path, Kind::bad_value, "head_count_kv does not divide head_count");
  if (c.head_dim % 2 != 0) bind_fail(path, Kind::bad_value, "head_dim " + std::to_string(c.head_dim) + " is odd (RoPE pairs)");
  if (c.block_size < 2) bind_fail(path, Kind::bad_value, "block_size " + std::to_string(c.block_size) + " < 2 (no token to draft)");
  if (!(c.rope_theta > 0) || !(c.norm_eps > 0) || !std::isfinite(c.rope_theta) || !std::isfinite(c.norm_eps)) {
    bind_fail(path, Kind::bad_value, "rope.freq_base and layer_norm_rms_epsilon must be positive and finite");
  }
  std::vector<int32_t> stored;
  try {
    stored = f.get_i32_array("dflash.target_layers");
    c.mask_token = static_cast<int32_t>(f.get_i64("tokenizer.ggml.mask_token_id"));
  } catch (const GgufError& e) {
    throw DrafterBindError(e.kind() == GgufErrorKind::missing_key ? Kind::missing_key : Kind::bad_value, e.what());
  }

  // --- Sizes against the target ------------------------------------------------------------
  if (c.d_model != tc.d_model) {
    bind_fail(path, Kind::wrong_width, "dflash.embedding_length " + std::to_string(c.d_model) + " differs from the target's d_model " +
                                std::to_string(tc.d_model) + " (" + target.path() + ")");
  }
  if (stored.empty()) bind_fail(path, Kind::bad_value, "dflash.target_layers is empty");
  for (int32_t L : stored) {
    // Stored +1 as llama.cpp's converter writes them: L = the hidden state entering target
    // layer L = our hidden layer L − 1.
    if (L < 1 || L > tc.n_layer) {
      bind_fail(path, Kind::bad_tap, "dflash.target_layers holds " + std::to_string(L) + ", outside [1, " +
                              std::to_string(tc.n_layer) + "] (the target has " + std::to_string(tc.n_layer) + " layers)");
    }
    c.taps.push_back(L - 1);
  }
  c.n_vocab = tc.n_vocab;
  if (c.mask_token < 0 || c.mask_token >= tc.n_vocab) {
    bind_fail(path, Kind::vocab_mismatch, "tokenizer.ggml.mask_token_id " + std::to_string(c.mask_token) +
                                   " is outside the target's vocabulary of " + std::to_string(tc.n_vocab));
  }
  if (f.has("dflash.vocab_size") && keys.u32("vocab_size") != tc.n_vocab) {
    bind_fail(path, Kind::vocab_mismatch, "dflash.vocab_size differs from the target's vocabulary of " + std::to_string(tc.n_vocab));
  }
  try {
    if (f.has("specchat.target.n_vocab") && f.get_i64("specchat.target.n_vocab") != tc.n_vocab) {
      bind_fail(path, Kind::vocab_mismatch, "specchat.target.n_vocab = " + std::to_string(f.get_i64("specchat.target.n_vocab")) +
                                     " but the target has " + std::to_string(tc.n_vocab) + " tokens");
    }
    if (f.has("specchat.target.architecture") && f.get_string("specchat.target.architecture") != tc.architecture) {
      bind_fail(path, Kind::target_mismatch, "trained for a '" + f.get_string("specchat.target.architecture") + "' target, not '" +
                                      tc.architecture + "'");
    }
  } catch (const GgufError& e) {
    throw DrafterBindError(Kind::bad_value, e.what());
  }
  if (!std::filesystem::is_regular_file(target.path())) {
    bind_fail(path, Kind::target_unreadable, "the target (" + target.path() + ") has no file to read its embedding and LM head from");
  }

  // --- Tensors -------------------------------------------------------------------------------
  const uint64_t d = static_cast<uint64_t>(c.d_model), hd = static_cast<uint64_t>(c.head_dim);
  const uint64_t nq = static_cast<uint64_t>(c.n_head) * hd, nkv = static_cast<uint64_t>(c.n_head_kv) * hd;
  const uint64_t ff = static_cast<uint64_t>(c.d_ff), nv = static_cast<uint64_t>(tc.n_vocab);
  const uint64_t m_taps = static_cast<uint64_t>(c.taps.size());
  static const char* kLayerTensors[] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm",
                                        "attn_k_norm", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"};
  std::set<std::string> allowed = {"fc.weight", "enc.output_norm.weight", "output_norm.weight", "token_embd.weight",
                                   "output.weight"};
  for (int il = 0; il < c.n_layer; ++il) {
    for (const char* t : kLayerTensors) allowed.insert(layer_prefix(il) + t + ".weight");
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (allowed.count(t.name)) continue;
    if (t.name.rfind("blk.", 0) == 0 && t.name.find(".attn_") != std::string::npos &&
        t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0) {
      bind_fail(path, Kind::unsupported, "tensor " + t.name + ": attention biases are not supported by the DFlash drafter");
    }
    bind_fail(path, Kind::unsupported, "unexpected tensor " + t.name + " (not part of a " + std::to_string(c.n_layer) +
                                "-layer DFlash drafter; SpecChat would not use it)");
  }
  auto need = [&](const GgufFile& src, const std::string& name, const std::vector<uint64_t>& ne,
                  Kind shape_kind) -> const GgufTensorInfo& {
    const GgufTensorInfo* t = src.tensor(name);
    if (!t) bind_fail(path, Kind::missing_tensor, "tensor " + name + " is missing");
    if (t->ne != ne) bind_fail(path, shape_kind, "tensor " + name + " has shape " + dims(t->ne) + ", expected " + dims(ne));
    if (dtype_is_block(t->type) && t->ne[0] % static_cast<uint64_t>(dtype_block_size(t->type)) != 0) {
      bind_fail(path, Kind::unsupported, "tensor " + name + ": rows of " + std::to_string(t->ne[0]) + " are not whole " +
                                  dtype_name(t->type) + " blocks");
    }
    return *t;
  };
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const WeightView v = view(need(f, name, {n_in, n_out}, Kind::wrong_shape));
    m->weight_bytes_ += v.bytes();
    return v;
  };
  auto vec = [&](const std::string& name, uint64_t n) {
    m->weight_bytes_ += n * sizeof(float);
    return norm_f32(need(f, name, {n}, Kind::wrong_shape), m->owned_);
  };
  {  // fc: its width names the taps × d_model contract, so a wrong one is wrong_width
    const GgufTensorInfo* t = f.tensor("fc.weight");
    if (!t) bind_fail(path, Kind::missing_tensor, "tensor fc.weight is missing");
    if (t->ne.size() != 2 || t->ne[0] != m_taps * d) {
      bind_fail(path, Kind::wrong_width, "fc.weight has shape " + dims(t->ne) + ": its input width must be taps × d_model = " +
                                  std::to_string(m_taps) + " × " + std::to_string(d) + " = " + std::to_string(m_taps * d));
    }
    m->fc_ = mat("fc.weight", m_taps * d, d);
  }
  m->enc_norm_ = vec("enc.output_norm.weight", d);
  m->output_norm_ = vec("output_norm.weight", d);
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = layer_prefix(il);
    Layer l;
    l.attn_norm = vec(p + "attn_norm.weight", d);
    l.wq = mat(p + "attn_q.weight", d, nq);
    l.wk = mat(p + "attn_k.weight", d, nkv);
    l.wv = mat(p + "attn_v.weight", d, nkv);
    l.wo = mat(p + "attn_output.weight", nq, d);
    l.q_norm = vec(p + "attn_q_norm.weight", hd);
    l.k_norm = vec(p + "attn_k_norm.weight", hd);
    l.ffn_norm = vec(p + "ffn_norm.weight", d);
    l.w_gate = mat(p + "ffn_gate.weight", d, ff);
    l.w_up = mat(p + "ffn_up.weight", d, ff);
    l.w_down = mat(p + "ffn_down.weight", ff, d);
    m->layers_.push_back(l);
  }
  // Embedding and LM head: the file's own when present (must have the target's shape), else
  // the target's (its output, or its token_embd when tied).
  m->target_file_ = std::make_unique<GgufFile>(GgufFile::open(target.path()));
  const GgufFile& tf = *m->target_file_;
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    if (f.tensor(name) && f.tensor(name)->ne != std::vector<uint64_t>{d, nv}) {
      bind_fail(path, Kind::vocab_mismatch, std::string("tensor ") + name + " has shape " + dims(f.tensor(name)->ne) +
                                     ", the target's is " + dims({d, nv}));
    }
  }
  auto target_mat = [&](const GgufFile& src, const std::string& name) {
    return view(need(src, name, {d, nv}, Kind::vocab_mismatch));
  };
  m->tok_embd_ = f.tensor("token_embd.weight") ? target_mat(f, "token_embd.weight") : target_mat(tf, "token_embd.weight");
  if (f.tensor("output.weight")) {
    m->output_ = target_mat(f, "output.weight");
  } else {
    m->output_ = tf.tensor("output.weight") ? target_mat(tf, "output.weight") : m->tok_embd_;
  }
  if (f.tensor("token_embd.weight")) m->weight_bytes_ += m->tok_embd_.bytes();
  if (f.tensor("output.weight")) m->weight_bytes_ += m->output_.bytes();

  // --- The exact target file (last: it reads the whole target) -------------------------------
  if (opt.check_sha256 && f.has("specchat.target.sha256")) {
    std::string want;
    try {
      want = f.get_string("specchat.target.sha256");
    } catch (const GgufError& e) {
      throw DrafterBindError(Kind::bad_value, e.what());
    }
    std::transform(want.begin(), want.end(), want.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const std::string got = sha256_file_hex(target.path());
    if (got != want) {
      bind_fail(path, Kind::sha256_mismatch, "trained against a target with SHA-256 " + want + ", but " + target.path() +
                                      " has SHA-256 " + got + " (a different file)");
    }
  }

  // --- Runtime tables ------------------------------------------------------------------------
  m->n_pos_ = opt.n_pos > 0 ? opt.n_pos : target.n_ctx() + c.block_size;
  m->rope_.n_rot = c.head_dim;
  m->rope_.theta = c.rope_theta;
  m->rope_.neox = true;
  const size_t n_tab = static_cast<size_t>(m->n_pos_) * static_cast<size_t>(c.head_dim / 2);
  m->rope_cos_.resize(n_tab);
  m->rope_sin_.resize(n_tab);
  cpu::rope_table(m->n_pos_, m->rope_, m->rope_cos_.data(), m->rope_sin_.data());
  m->pool_ = opt.pool ? opt.pool : std::make_shared<cpu::ThreadPool>(opt.n_threads);
  m->act_ = opt.activations;

  // --- Products on panels (engine/panel_arena.h) ---------------------------------------------
  // The drafter's own matrices go to its arena (their file pages are given back). The LM head:
  // the target's packed one when this drafter reads the target's head (no second copy), its own
  // (the file's output, or its token_embd when neither file has an output) packed here.
  const bool own_head = f.tensor("output.weight") || (!tf.tensor("output.weight") && f.tensor("token_embd.weight"));
  std::vector<WeightView*> mats{&m->fc_};
  for (Layer& l : m->layers_) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) mats.push_back(v);
  }
  if (own_head) {
    mats.push_back(&m->output_);
  } else if (SharedWeight head = target.packed_lm_head(); head.keep) {
    m->output_ = head.view;
    m->head_keep_ = std::move(head.keep);
  }
  m->panels_ = pack_in_panels(mats, m->pool_.get(), [&](const WeightView& v) {
    if (v.data != m->tok_embd_.data) f.release_pages(v.data, v.bytes());
  });
  return m;
}

DFlashModel::~DFlashModel() = default;

}  // namespace specchat
