// Architectures against the conformance pack's exact f64 references (tests/data/quant/,
// quant_cases.h). B-F16 is a qwen2 model (Q/K/V biases, NeoX RoPE, GQA) with F16 weights: the
// CPU backend keeps activations in f32, so it is held to the strict tier (1e-3 normalized).
#include <catch2/catch.hpp>

#include "quant_cases.h"

using namespace specchat;

TEST_CASE("qwen2 B-F16 matches the exact reference (strict tier), argmax rows and greedy prefix", "[model][conformance]") {
  auto m = LlamaModel::load(test::quant_case("B-F16.gguf"));
  REQUIRE(m->config().architecture == "qwen2");
  CHECK(m->config().qkv_bias);
  CHECK(m->config().rope_mode == RopeMode::neox);
  test::check_quant_case(*m, "B-F16", "exact_math");
}
