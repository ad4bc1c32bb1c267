// OpProfile (engine/op_profile.h): the CPU backend's per-operation timing for `bench --profile`
// counts each operation once per layer and forward, names the matmuls with their shapes, and
// changes nothing in the forward's results.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/model.h"
#include "engine/model_fixture.h"
#include "engine/op_profile.h"

using namespace specchat;

TEST_CASE("op profile: counts per layer and forward, shapes in the names, identical logits", "[model][engine]") {
  REQUIRE(test::bundled_models_present());
  auto m = LlamaModel::load(test::target_model(), LlamaModel::Options{});
  const int n_layer = m->config().n_layer;
  const std::vector<int32_t> toks = {1, 40, 41, 42, 43};
  const Batch b = Batch::chain(toks, 0, true);
  const auto first = m->forward(b);
  const std::vector<float> plain(first.begin(), first.end());

  OpProfile p;
  REQUIRE(m->set_profile(&p));
  const auto profiled = m->forward(b);
  CHECK(std::vector<float>(profiled.begin(), profiled.end()) == plain);
  CHECK(p.forwards == 1);
  CHECK(p.rows == 5);
  CHECK(p.ops[OpProfile::attention].calls == n_layer);
  CHECK(p.ops[OpProfile::matmul_qkv].calls == n_layer);
  CHECK(p.ops[OpProfile::matmul_down].calls == n_layer);
  CHECK(p.ops[OpProfile::matmul_head].calls == 1);
  CHECK(p.ops[OpProfile::norm].calls == 2 * n_layer + 1);
  CHECK(p.ops[OpProfile::hidden_copy].calls == 0);  // no hidden states asked for
  CHECK(p.ops[OpProfile::matmul_head].name ==
        "matmul LM head " + std::to_string(m->config().d_model) + " -> " + std::to_string(m->config().n_vocab));
  CHECK(p.ops[OpProfile::attention].name == "attention");
  CHECK(p.total_ms() > 0);

  REQUIRE(m->set_profile(nullptr));  // stops recording
  m->forward(b);
  CHECK(p.forwards == 1);
  p.clear();
  CHECK(p.total_ms() == 0);
  CHECK(p.ops[OpProfile::attention].name == "attention");  // names survive clear()
}
