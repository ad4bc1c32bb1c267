// A tiny PIPO release unit for tests (docs/design/pipo.md): a tiny llama backbone (tiny_model.h,
// the bundled tokenizer's 4096 tokens), a random MTP head bound to it (mtp_fixture.h) and a
// random io part (compressor, PAD embedding, confidence head), written under a temporary folder
// with their manifest. Every key, tensor and manifest field can be changed before write(), so
// the tests can make mixed or broken releases. Also an independent f64 reference of the io
// ends' math.
#pragma once

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/drafters/mtp_fixture.h"
#include "engine/drafters/sha256.h"
#include "engine/pipo/pipo_io.h"

namespace specchat::test {

struct PipoIoSpec {
  int d_model = 64, conf_dim = 16;
  uint64_t seed = 23;
};

// A random io part: compressor matrices ±sqrt(3 / n_in) (so the MLP path matters), biases and
// the PAD embedding ±0.3, the confidence norm 1 ± 0.2.
inline MtpFile random_pipo_io(const PipoIoSpec& s) {
  MtpFile f;
  const std::string A = "specchat-pipo-io.";
  f.kv["general.architecture"] = gguf_value::string("specchat-pipo-io");
  f.kv[A + "embedding_length"] = gguf_value::uint(GgufType::u32, static_cast<uint64_t>(s.d_model));
  f.kv[A + "confidence_length"] = gguf_value::uint(GgufType::u32, static_cast<uint64_t>(s.conf_dim));
  f.kv[A + "pair_size"] = gguf_value::uint(GgufType::u32, 2);
  f.kv[A + "attention.layer_norm_rms_epsilon"] = gguf_value::f32(1e-5f);
  std::mt19937_64 g(s.seed);
  const uint64_t d = static_cast<uint64_t>(s.d_model), C = static_cast<uint64_t>(s.conf_dim);
  auto mat = [&](const std::string& name, uint64_t n_in, uint64_t n_out) {
    const float a = std::sqrt(3.0f / static_cast<float>(n_in));
    std::uniform_real_distribution<float> u(-a, a);
    std::vector<float> w(n_in * n_out);
    for (float& x : w) x = u(g);
    f.tensors.push_back(f32_tensor(name, {n_in, n_out}, w));
  };
  auto vec = [&](const std::string& name, uint64_t n, float center, float spread) {
    std::uniform_real_distribution<float> u(center - spread, center + spread);
    std::vector<float> w(n);
    for (float& x : w) x = u(g);
    f.tensors.push_back(f32_tensor(name, {n}, w));
  };
  vec("pipo.pad_embd", d, 0.0f, 0.3f);
  mat("pipo.comp.fc1.weight", 2 * d, 2 * d);
  vec("pipo.comp.fc1.bias", 2 * d, 0.0f, 0.3f);
  mat("pipo.comp.fc2.weight", 2 * d, d);
  vec("pipo.comp.fc2.bias", d, 0.0f, 0.3f);
  vec("pipo.conf.norm.weight", 2 * d, 1.0f, 0.2f);
  mat("pipo.conf.fc1.weight", 2 * d, C);
  vec("pipo.conf.fc1.bias", C, 0.0f, 0.3f);
  mat("pipo.conf.fc2.weight", C, 1);
  vec("pipo.conf.fc2.bias", 1, 0.0f, 0.3f);
  return f;
}

// The unit before writing. write() fills the binding keys and the manifest's hashes from what
// it writes unless a test set the override fields.
struct PipoFixture {
  TempDir dir{"pipo"};
  std::string release = "test-release-1";
  std::string target_sha = std::string(64, 'a');  // the plain target's (any file in these tests)
  GgufBuilder backbone;
  MtpFile mtp, io;
  // Per-part overrides written instead of the defaults (empty = default).
  std::map<std::string, std::string> part_release, part_role, part_target_sha, manifest_sha;
  std::string manifest_extra;  // raw JSON members appended to the manifest object (",\"x\": 1")
  std::string format = "specchat-pipo";
  int version = 1, pair_size = 2;
  uint64_t mtp_seed = 11, io_seed = 23;

  explicit PipoFixture(int n_ctx = 96) {
    TinySpec s;
    s.n_ctx = n_ctx;
    backbone = tiny_model(s);
    MtpSpec ms;
    ms.seed = mtp_seed;
    mtp = random_mtp(ms);
    PipoIoSpec is;
    is.seed = io_seed;
    io = random_pipo_io(is);
  }
  std::string path(const std::string& part) const { return dir.file(part + ".gguf"); }
  std::string manifest() const { return dir.file("pipo.json"); }

  std::string value(const std::map<std::string, std::string>& m, const std::string& part, const std::string& def) const {
    const auto it = m.find(part);
    return it == m.end() ? def : it->second;
  }
  void write() {
    auto tag = [&](std::map<std::string, GgufValue>& kv, const std::string& part) {
      kv["pipo.release"] = gguf_value::string(value(part_release, part, release));
      kv["pipo.role"] = gguf_value::string(value(part_role, part, part));
      kv["pipo.target.sha256"] = gguf_value::string(value(part_target_sha, part, target_sha));
    };
    backbone.set_string("pipo.release", value(part_release, "backbone", release));
    backbone.set_string("pipo.role", value(part_role, "backbone", "backbone"));
    backbone.set_string("pipo.target.sha256", value(part_target_sha, "backbone", target_sha));
    backbone.write_file(path("backbone"));
    const std::string bsha = sha256_file_hex(path("backbone"));
    if (!mtp.kv.count("specchat.target.sha256")) mtp.kv["specchat.target.sha256"] = gguf_value::string(bsha);
    tag(mtp.kv, "mtp");
    mtp.write(path("mtp"));
    tag(io.kv, "io");
    io.write(path("io"));
    write_manifest();
  }
  // The manifest alone, hashing the part files as they are now (unless manifest_sha overrides).
  void write_manifest() const {
    std::ofstream out(manifest(), std::ios::trunc);
    out << "{\"format\": \"" << format << "\", \"version\": " << version << ", \"release\": \"" << release
        << "\", \"pair_size\": " << pair_size << ", \"extra_draft_tokens\": 1, \"recommended_threshold\": 0.5,"
        << " \"target\": {\"file\": \"target.gguf\", \"sha256\": \"" << target_sha << "\"}, \"parts\": {";
    const char* parts[3] = {"backbone", "mtp", "io"};
    for (int i = 0; i < 3; ++i) {
      const std::string p = parts[i];
      out << (i ? ", " : "") << "\"" << p << "\": {\"file\": \"" << p << ".gguf\", \"sha256\": \""
          << value(manifest_sha, p, sha256_file_hex(path(p))) << "\"}";
    }
    out << "}, \"quality\": {\"note\": \"test\"}" << manifest_extra << "}\n";
  }
};

// f64 reference of the compressor (docs/design/pipo.md, Math 1) from the io and backbone files.
inline std::vector<double> reference_latent(const GgufFile& io, const GgufFile& backbone, int32_t a, int32_t b) {
  auto f32 = [](const GgufFile& f, const std::string& name) {
    const GgufTensorInfo* t = f.tensor(name);
    std::vector<float> v(t->n_elements());
    dequantize_to_f32(t->type, t->data, v.data(), v.size());
    return v;
  };
  const auto emb = f32(backbone, "token_embd.weight");
  const auto pad = f32(io, "pipo.pad_embd");
  const size_t d = pad.size();
  std::vector<double> cat(2 * d);
  for (size_t i = 0; i < d; ++i) {
    cat[i] = emb[static_cast<size_t>(a) * d + i];
    cat[d + i] = b == kPipoPad ? pad[i] : emb[static_cast<size_t>(b) * d + i];
  }
  const auto w1 = f32(io, "pipo.comp.fc1.weight"), b1 = f32(io, "pipo.comp.fc1.bias");
  const auto w2 = f32(io, "pipo.comp.fc2.weight"), b2 = f32(io, "pipo.comp.fc2.bias");
  std::vector<double> mid(2 * d), out(d);
  for (size_t o = 0; o < 2 * d; ++o) {
    double s = b1[o];
    for (size_t i = 0; i < 2 * d; ++i) s += static_cast<double>(w1[o * 2 * d + i]) * cat[i];
    mid[o] = s / (1.0 + std::exp(-s));
  }
  for (size_t o = 0; o < d; ++o) {
    double s = b2[o];
    for (size_t i = 0; i < 2 * d; ++i) s += static_cast<double>(w2[o * 2 * d + i]) * mid[i];
    out[o] = s + cat[o] + cat[d + o];
  }
  return out;
}

// f64 reference of the confidence head (Math 4).
inline double reference_confidence(const GgufFile& io, const float* h, const float* g, size_t d) {
  auto f32 = [&](const std::string& name) {
    const GgufTensorInfo* t = io.tensor(name);
    std::vector<float> v(t->n_elements());
    dequantize_to_f32(t->type, t->data, v.data(), v.size());
    return v;
  };
  const auto nw = f32("pipo.conf.norm.weight"), w1 = f32("pipo.conf.fc1.weight"), b1 = f32("pipo.conf.fc1.bias");
  const auto w2 = f32("pipo.conf.fc2.weight"), b2 = f32("pipo.conf.fc2.bias");
  std::vector<double> x(2 * d);
  double ss = 0;
  for (size_t i = 0; i < d; ++i) {
    x[i] = h[i];
    x[d + i] = g[i];
  }
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(2 * d) + 1e-5);
  for (size_t i = 0; i < 2 * d; ++i) x[i] *= r * nw[i];
  const size_t C = b1.size();
  double z = b2[0];
  for (size_t o = 0; o < C; ++o) {
    double s = b1[o];
    for (size_t i = 0; i < 2 * d; ++i) s += static_cast<double>(w1[o * 2 * d + i]) * x[i];
    z += static_cast<double>(w2[o]) * (s / (1.0 + std::exp(-s)));
  }
  return 1.0 / (1.0 + std::exp(-z));
}

}  // namespace specchat::test
