// Conformance of the quantized weight types against models written and quantized by llama.cpp
// (tests/data/quant, README there): logits against the exact f64 forward on the dequantized
// weights (.exact.f32) within a tier of tolerances.json, the argmax on the tier's decisive rows and
// the greedy continuation up to the tier's guaranteed prefix. Which tier is the kernels' path
// (kernels/cpu/linear.h): with activations kept in f32 (LlamaModel::Options::activations = f32)
// every type meets the STRICT tier (1e-3 normalized); the default integer path rounds the
// activations of block-type matrices to 8 bits as llama.cpp does, and meets the llama.cpp-class
// tier (F16 files take the f32 path either way).
//
// Both sets are in the repository: A (llama: Q8_0, Q4_K_M with Q6_K tensors, Q6_K) and B (the
// qwen2 architecture, with Q/K/V biases and NeoX RoPE: F16, Q8_0, Q4_K_M, Q6_K). Every row is
// checked from one batch and from a token-by-token decode (the decode path).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/model.h"
#include "test_paths.h"

using namespace specchat;

namespace {

constexpr int kVocab = 4096;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  REQUIRE(in.good());
  const auto n = static_cast<size_t>(in.tellg());
  std::vector<float> v(n / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
  return v;
}

// Lowest id wins ties, as the pack's argmax.
int argmax(const float* row) { return static_cast<int>(std::max_element(row, row + kVocab) - row); }

void check_model_kv(const std::string& dir, const std::string& name, const nlohmann::json& seqs,
                    const nlohmann::json& tol, DType kv_type, cpu::Activations act) {
  LlamaModel::Options o;
  o.n_ctx = 256;
  o.max_batch = 64;
  o.kv_type = kv_type;
  o.activations = act;
  auto m = LlamaModel::load(dir + "/" + name + ".gguf", o);
  const bool quantized = name.find("F16") == std::string::npos;
  CHECK(m->memory().q8_activations == (quantized && act == cpu::Activations::q8));
  const char* tier = act == cpu::Activations::f32 ? "exact_math" : "llama_cpp_class";
  // The weights stay in their file type: bytes held = the file's tensor bytes.
  const GgufFile f = GgufFile::open(dir + "/" + name + ".gguf");
  size_t file_bytes = 0;
  for (const GgufTensorInfo& t : f.tensors()) file_bytes += t.n_bytes;
  CHECK(m->weight_bytes() == file_bytes);

  const nlohmann::json greedy = read_json(dir + "/" + name + ".greedy.json");
  for (const std::string seq : {"seq1", "seq2", "seq3"}) {
    const auto ids = seqs.at(seq).at("ids").get<std::vector<int32_t>>();
    const nlohmann::json& t = tol.at("per_file").at(name).at(seq).at(tier);
    const std::vector<float> exact = read_f32(dir + "/" + name + "." + seq + ".exact.f32");
    REQUIRE(exact.size() == ids.size() * kVocab);

    m->kv().truncate(0);
    const auto batch = m->forward(Batch::chain(ids, 0, true));
    const std::vector<float> got(batch.begin(), batch.end());
    REQUIRE(got.size() == exact.size());
    double max_exact = 0, max_err = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      max_exact = std::max(max_exact, std::fabs(static_cast<double>(exact[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - exact[i]));
    }
    const double norm_err = max_err / max_exact;
    INFO(name << " " << seq << ": normalized error " << norm_err << " (" << tier << " tier " << t.at("norm_tol") << ")");
    CHECK(norm_err <= t.at("norm_tol").get<double>());
    // The same rows one token per forward (KV cache reads instead of in-batch rows).
    m->kv().truncate(0);
    double max_err_steps = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto l = m->forward(Batch::chain(std::span<const int32_t>(&ids[i], 1), static_cast<int>(i), true));
      for (size_t v = 0; v < static_cast<size_t>(kVocab); ++v) {
        max_err_steps = std::max(max_err_steps, std::fabs(static_cast<double>(l[v]) - exact[i * kVocab + v]));
      }
    }
    INFO("token by token: normalized error " << max_err_steps / max_exact);
    CHECK(max_err_steps / max_exact <= t.at("norm_tol").get<double>());
    m->kv().truncate(0);
    m->forward(Batch::chain(ids, 0, false));  // the prompt's K/V as the one batch wrote them
    int decisive = 0;
    for (int r : t.at("decisive_rows").get<std::vector<int>>()) {
      INFO("row " << r);
      CHECK(argmax(got.data() + static_cast<size_t>(r) * kVocab) == argmax(exact.data() + static_cast<size_t>(r) * kVocab));
      ++decisive;
    }
    CHECK(decisive > 0);

    // Greedy continuation, one token per forward, up to the guaranteed prefix.
    const int prefix = t.at("greedy_guaranteed_prefix").get<int>();
    const auto want = greedy.at("sequences").at(seq).at("exact").at("tokens").get<std::vector<int32_t>>();
    std::vector<int32_t> gen;
    int next = argmax(got.data() + (ids.size() - 1) * kVocab);
    for (int step = 0; step < prefix; ++step) {
      gen.push_back(next);
      const int32_t tok = next;
      const auto l = m->forward(Batch::chain(std::span<const int32_t>(&tok, 1), static_cast<int>(ids.size()) + step, true));
      next = argmax(l.data());
    }
    INFO("greedy prefix " << prefix);
    CHECK(gen == std::vector<int32_t>(want.begin(), want.begin() + prefix));
  }
}

// Checks model `name` (X.gguf with X.seqN.exact.f32, X.greedy.json) in `dir` against
// `tol` (tolerances.json): f32 activations in the strict tier with an f32 and with the default
// f16 KV cache (the f16 cache's rounding of K/V stays inside it here), and the defaults (q8
// activations, f16 cache) in the llama.cpp-class tier.
void check_model(const std::string& dir, const std::string& name, const nlohmann::json& seqs, const nlohmann::json& tol) {
  for (const DType kv_type : {DType::f32, DType::f16}) {
    INFO("f32 activations, KV cache " << dtype_name(kv_type));
    check_model_kv(dir, name, seqs, tol, kv_type, cpu::Activations::f32);
  }
  INFO("q8 activations, KV cache f16");
  check_model_kv(dir, name, seqs, tol, DType::f16, cpu::Activations::q8);
}

}  // namespace

TEST_CASE("quantized llama files (Q8_0, Q4_K_M, Q6_K) match the exact reference in their tiers", "[model][quant]") {
  const std::string dir = test::test_data("quant");
  const nlohmann::json seqs = read_json(dir + "/sequences.json");
  const nlohmann::json tol = read_json(dir + "/tolerances.json");
  for (const std::string name : {"A-Q8_0", "A-Q4_K_M", "A-Q6_K"}) {
    SECTION(name) { check_model(dir, name, seqs, tol); }
  }
}

TEST_CASE("qwen2 files (F16, Q8_0, Q4_K_M, Q6_K) match the exact reference in their tiers", "[model][quant]") {
  const std::string dir = test::test_data("quant");
  const nlohmann::json seqs = read_json(dir + "/sequences.json");
  const nlohmann::json tol = read_json(dir + "/tolerances.json");
  for (const std::string name : {"B-F16", "B-Q8_0", "B-Q4_K_M", "B-Q6_K"}) {
    SECTION(name) {
      LlamaModel::Options o;
      o.n_ctx = 256;
      REQUIRE(LlamaModel::load(dir + "/" + name + ".gguf", o)->config().architecture == "qwen2");
      check_model(dir, name, seqs, tol);
    }
  }
}
