#include "engine/pipo/pipo_io.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "engine/model.h"
#include "engine/pipo/pipo_error.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/ops.h"

namespace specchat {

namespace {

constexpr const char* kArch = "specchat-pipo-io";

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

PipoIo::~PipoIo() = default;

std::shared_ptr<const PipoIo> PipoIo::load(const std::string& path, const LlamaModel& backbone,
                                           std::shared_ptr<cpu::ThreadPool> pool) {
  using K = PipoErrorKind;
  std::shared_ptr<PipoIo> m(new PipoIo());
  m->pool_ = std::move(pool);
  m->path_ = path;
  m->file_ = std::make_unique<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *m->file_;
  auto fail = [&](K kind, const std::string& what) { throw PipoError(kind, path + ": " + what); };
  const std::string arch = f.has("general.architecture") ? f.get_string("general.architecture") : "";
  if (arch != kArch) fail(K::wrong_role, "general.architecture is '" + arch + "', not '" + kArch + "'");
  const std::string A = std::string(kArch) + ".";
  static const std::set<std::string> known = {"embedding_length", "confidence_length", "pair_size",
                                              "attention.layer_norm_rms_epsilon"};
  for (const auto& [key, v] : f.metadata()) {
    if (key.rfind(A, 0) == 0 && !known.count(key.substr(A.size()))) fail(K::bad_setting, "key '" + key + "' is not one SpecChat runs");
  }
  if (f.get_u32_or(A + "pair_size", 2) != 2) {
    fail(K::bad_setting, A + "pair_size is " + std::to_string(f.get_u32(A + "pair_size")) + "; SpecChat runs pairs of 2");
  }
  PipoIoConfig& c = m->cfg_;
  c.d_model = static_cast<int>(f.get_u32(A + "embedding_length"));
  c.conf_dim = static_cast<int>(f.get_u32(A + "confidence_length"));
  c.norm_eps = f.get_f32_or(A + "attention.layer_norm_rms_epsilon", 1e-5f);
  const ModelConfig& bc = backbone.config();
  if (c.d_model != bc.d_model) {
    fail(K::wrong_shape, A + "embedding_length is " + std::to_string(c.d_model) + ", the backbone's width is " +
                             std::to_string(bc.d_model) + " (" + backbone.path() + ")");
  }
  if (c.conf_dim <= 0 || c.conf_dim > (1 << 16)) fail(K::wrong_shape, A + "confidence_length " + std::to_string(c.conf_dim) + " is not usable");
  m->n_vocab_ = bc.n_vocab;

  try {
    m->backbone_file_ = std::make_unique<GgufFile>(GgufFile::open(backbone.path()));
  } catch (const GgufError& e) {
    fail(K::missing_part, "the backbone's GGUF file cannot be read for its token embedding: " + std::string(e.what()));
  }
  const GgufTensorInfo* te = m->backbone_file_->tensor("token_embd.weight");
  if (!te || te->ne.size() != 2 || te->ne[0] != static_cast<uint64_t>(bc.d_model) ||
      te->ne[1] != static_cast<uint64_t>(bc.n_vocab)) {
    fail(K::wrong_shape, "the backbone has no token_embd.weight of shape [d_model, n_vocab]");
  }
  m->tok_embd_ = te->data;
  m->tok_embd_type_ = te->type;

  const uint64_t d = static_cast<uint64_t>(c.d_model), C = static_cast<uint64_t>(c.conf_dim);
  std::set<std::string> used;
  auto need = [&](const std::string& name, const std::vector<uint64_t>& ne) -> const GgufTensorInfo& {
    used.insert(name);
    const GgufTensorInfo* t = f.tensor(name);
    if (!t) fail(K::wrong_shape, "tensor '" + name + "' is missing");
    if (t->ne != ne) fail(K::wrong_shape, "tensor '" + name + "' has shape " + shape_str(t->ne) + ", expected " + shape_str(ne));
    return *t;
  };
  auto vec = [&](const std::string& name, uint64_t n) {
    const GgufTensorInfo& t = need(name, {n});
    std::vector<float> v(n);
    dequantize_to_f32(t.type, t.data, v.data(), v.size());
    return v;
  };
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const GgufTensorInfo& t = need(name, {n_in, n_out});
    if (dtype_is_block(t.type) && n_in % static_cast<uint64_t>(dtype_block_size(t.type)) != 0) {
      fail(K::wrong_shape, "tensor '" + name + "' rows are not whole " + ggml_type_name(t.type) + " blocks");
    }
    return Mat{t.data, t.type, static_cast<int>(n_in), static_cast<int>(n_out)};
  };
  m->pad_embd_ = vec("pipo.pad_embd", d);
  m->comp_fc1_ = mat("pipo.comp.fc1.weight", 2 * d, 2 * d);
  m->comp_b1_ = vec("pipo.comp.fc1.bias", 2 * d);
  m->comp_fc2_ = mat("pipo.comp.fc2.weight", 2 * d, d);
  m->comp_b2_ = vec("pipo.comp.fc2.bias", d);
  m->conf_norm_ = vec("pipo.conf.norm.weight", 2 * d);
  m->conf_fc1_ = mat("pipo.conf.fc1.weight", 2 * d, C);
  m->conf_b1_ = vec("pipo.conf.fc1.bias", C);
  m->conf_fc2_ = mat("pipo.conf.fc2.weight", C, 1);
  m->conf_b2_ = vec("pipo.conf.fc2.bias", 1);
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!used.count(t.name)) fail(K::bad_setting, "tensor '" + t.name + "' is not one SpecChat runs");
  }
  return m;
}

void PipoIo::linear(const float* x, const Mat& w, const std::vector<float>& bias, float* y) const {
  cpu::linear(x, w.data, w.type, y, 1, w.n_in, w.n_out, pool_.get());
  for (int i = 0; i < w.n_out; ++i) y[i] += bias[static_cast<size_t>(i)];
}

void PipoIo::embed(int32_t id, float* out) const {
  if (id == kPipoPad) {
    std::copy(pad_embd_.begin(), pad_embd_.end(), out);
    return;
  }
  cpu::embedding_gather(tok_embd_, tok_embd_type_, &id, out, 1, cfg_.d_model);
}

void PipoIo::compress(int32_t a, int32_t b, float* latent, PipoIoScratch& s) const {
  if (a < 0 || a >= n_vocab_) throw std::invalid_argument("PIPO: a pair's first token " + std::to_string(a) + " is not a vocabulary id");
  if ((b < 0 || b >= n_vocab_) && b != kPipoPad) {
    throw std::invalid_argument("PIPO: a pair's second token " + std::to_string(b) + " is neither a vocabulary id nor PAD");
  }
  const int d = cfg_.d_model;
  s.cat.resize(static_cast<size_t>(2 * d));
  s.mid.resize(static_cast<size_t>(2 * d));
  embed(a, s.cat.data());
  embed(b, s.cat.data() + d);
  linear(s.cat.data(), comp_fc1_, comp_b1_, s.mid.data());
  for (float& v : s.mid) v = silu(v);
  linear(s.mid.data(), comp_fc2_, comp_b2_, latent);
  for (int i = 0; i < d; ++i) latent[i] += s.cat[static_cast<size_t>(i)] + s.cat[static_cast<size_t>(d + i)];
}

float PipoIo::confidence(const float* h, const float* g, PipoIoScratch& s) const {
  const int d = cfg_.d_model;
  s.cat.resize(static_cast<size_t>(2 * d));
  std::copy(h, h + d, s.cat.begin());
  std::copy(g, g + d, s.cat.begin() + d);
  std::vector<float>& normed = s.mid;
  normed.resize(static_cast<size_t>(2 * d) + static_cast<size_t>(cfg_.conf_dim) + 1);
  cpu::rmsnorm(s.cat.data(), conf_norm_.data(), normed.data(), 1, 2 * d, cfg_.norm_eps);
  float* hid = normed.data() + 2 * d;
  linear(normed.data(), conf_fc1_, conf_b1_, hid);
  for (int i = 0; i < cfg_.conf_dim; ++i) hid[i] = silu(hid[i]);
  float z = 0.0f;
  linear(hid, conf_fc2_, conf_b2_, &z);
  return 1.0f / (1.0f + std::exp(-z));
}

}  // namespace specchat
