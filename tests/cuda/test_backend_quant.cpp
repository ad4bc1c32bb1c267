// [cuda] the CUDA backend on quantized files (tests/data/quant, llama.cpp's Q8_0, Q4_K_M and
// Q6_K files): weights held in their block types (device bytes = the file's tensor bytes) and
// logits within the strict conformance tier of the exact f64 reference, like the CPU backend.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/model.h"

using namespace specchat;

namespace {

// tests/data/quant, found from this file's path (test_cuda has no test-path definitions).
std::string quant_dir() {
  std::string f = __FILE__;  // <root>/tests/cuda/test_backend_quant.cpp
  for (int i = 0; i < 2; ++i) f = f.substr(0, f.find_last_of('/'));
  return f + "/data/quant";
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

}  // namespace

TEST_CASE("GPU: quantized files stay in their types and match the exact reference (strict tier)", "[cuda][backend][quant]") {
  // seq2 of the pack's sequences.json (BOS + 23 ids).
  const std::vector<int32_t> ids = {1,    3870, 2563, 2804, 3675, 2371, 3178, 3415, 927,  234, 1234, 1172,
                                    3578, 3738, 28,   2050, 3365, 544,  3266, 493,  1920, 3345, 1246, 1403};
  for (const std::string name : {"A-Q8_0", "A-Q4_K_M", "A-Q6_K"}) {
    CAPTURE(name);
    const std::string path = quant_dir() + "/" + name + ".gguf";
    LlamaModel::Options o;
    o.backend = BackendKind::cuda;
    o.n_ctx = 256;
    auto m = LlamaModel::load(path, o);
    const GgufFile f = GgufFile::open(path);
    size_t file_bytes = 0;
    for (const GgufTensorInfo& t : f.tensors()) file_bytes += t.n_bytes;
    CHECK(m->memory().weights_bytes == file_bytes);
    const auto got = m->forward(Batch::chain(ids, 0, true));
    const std::vector<float> exact = read_f32(quant_dir() + "/" + name + ".seq2.exact.f32");
    REQUIRE(got.size() == exact.size());
    double e = 0, s = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      e = std::max(e, std::fabs(static_cast<double>(got[i]) - exact[i]));
      s = std::max(s, std::fabs(static_cast<double>(exact[i])));
    }
    CHECK(e / s <= 1e-3);  // tolerances.json exact_math (the CPU backend: ~3e-7)
  }
}

TEST_CASE("GPU: a qwen2 model (Q/K/V biases, NeoX RoPE) is refused by the CUDA backend with the reason", "[cuda][backend]") {
  LlamaModel::Options o;
  o.backend = BackendKind::cuda;
  o.n_ctx = 256;
  try {
    LlamaModel::load(quant_dir() + "/B-F16.gguf", o);
    FAIL("the CUDA backend loaded a qwen2 model it cannot run");
  } catch (const ModelError& e) {
    const std::string m = e.what();
    CHECK(m.find("qwen2") != std::string::npos);
    CHECK(m.find("Q/K/V biases") != std::string::npos);
    CHECK(m.find("--backend cpu") != std::string::npos);
  }
}
