// The CPU forward against the training framework's logits, and batch/tree consistency.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "model_fixture.h"

using namespace specchat;

namespace {

using test::max_abs_diff;

}  // namespace

TEST_CASE("forward matches the recipe's reference logits", "[model][forward]") {
  // Reference logits come from PyTorch on the exported (F16-rounded) weights, so the only
  // difference is f32 summation order: 1e-3 absolute (ARCHITECTURE.md §4) with an f32 KV
  // cache. The default f16 cache rounds each K/V value (relative error <= 2^-11); measured
  // 1.1e-3 worst on these cases, so it is held to 3e-3.
  std::ifstream in(test::test_data("reference_logits.json"));
  REQUIRE(in.good());
  const nlohmann::json ref = nlohmann::json::parse(in);
  const DType kv_type = GENERATE(DType::f32, DType::f16);
  const double tol = ref.at("tolerance").get<double>() * (kv_type == DType::f16 ? 3.0 : 1.0);
  INFO("KV cache " << dtype_name(kv_type));
  for (const char* role : {"target", "draft"}) {
    const std::string path = std::string(role) == "target" ? test::target_model() : test::draft_model();
    LlamaModel::Options o;
    o.kv_type = kv_type;
    auto m = LlamaModel::load(path, o);
    for (const auto& c : ref.at("cases")) {
      if (!c.contains(role)) continue;
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      const auto positions = c.at("positions").get<std::vector<int>>();
      m->kv().truncate(0);
      Batch b = Batch::chain(ids, 0, false);
      b.out_rows.assign(positions.begin(), positions.end());
      const auto logits = m->forward(b);
      const size_t nv = static_cast<size_t>(m->config().n_vocab);
      for (size_t j = 0; j < positions.size(); ++j) {
        const auto want = c.at(role).at(j).get<std::vector<float>>();
        REQUIRE(want.size() == nv);
        INFO(role << " prompt '" << c.at("text").get<std::string>() << "' position " << positions[j]);
        CHECK(max_abs_diff(logits.subspan(j * nv, nv), want) <= tol);
      }
    }
  }
}

TEST_CASE("a chain batch equals feeding tokens one at a time", "[model][forward]") {
  auto m = LlamaModel::load(test::target_model());
  const std::vector<int32_t> ids = {1, 500, 37, 1200, 9, 77, 3000, 15};
  const size_t nv = static_cast<size_t>(m->config().n_vocab);
  m->kv().truncate(0);
  const auto batched = m->forward(Batch::chain(ids, 0, true));
  std::vector<float> all(batched.begin(), batched.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t one[1] = {ids[i]};
    const auto l = m->forward(Batch::chain(one, static_cast<int>(i), false));
    INFO("position " << i);
    CHECK(max_abs_diff(l, std::vector<float>(all.begin() + static_cast<long>(i * nv),
                                             all.begin() + static_cast<long>((i + 1) * nv))) < 1e-4);
  }
}

TEST_CASE("tree attention: each node sees only its ancestors", "[model][forward]") {
  // Tree over prefix P: node0 = a (root child), node1 = b (child of 0), node2 = c (child of 0),
  // node3 = d (root child). Node2's logits must equal those of the chain P,a,c.
  auto m = LlamaModel::load(test::target_model());
  const size_t nv = static_cast<size_t>(m->config().n_vocab);
  const std::vector<int32_t> prefix = {1, 250, 61, 900};
  const int32_t a = 42, b = 300, c = 1111, d = 7;
  const int n0 = static_cast<int>(prefix.size());
  m->kv().truncate(0);
  m->forward(Batch::chain(prefix, 0, false));
  m->kv().commit(prefix);
  Batch t;
  t.tokens = {a, b, c, d};
  t.parent = {-1, 0, 0, -1};
  t.pos = {n0, n0 + 1, n0 + 1, n0};
  t.kv_pos0 = n0;
  t.out_rows = {0, 1, 2, 3};
  const auto tl = m->forward(t);
  const std::vector<float> tree(tl.begin(), tl.end());
  auto chain_logits = [&](std::vector<int32_t> toks) {
    m->kv().truncate(0);
    const auto l = m->forward(Batch::chain(toks, 0, false));
    return std::vector<float>(l.begin(), l.end());
  };
  auto row = [&](int r) {
    return std::span<const float>(tree.data() + static_cast<size_t>(r) * nv, nv);
  };
  auto with = [&](std::initializer_list<int32_t> tail) {
    std::vector<int32_t> v = prefix;
    v.insert(v.end(), tail);
    return v;
  };
  CHECK(max_abs_diff(row(0), chain_logits(with({a}))) < 1e-4);
  CHECK(max_abs_diff(row(1), chain_logits(with({a, b}))) < 1e-4);
  CHECK(max_abs_diff(row(2), chain_logits(with({a, c}))) < 1e-4);
  CHECK(max_abs_diff(row(3), chain_logits(with({d}))) < 1e-4);
}

TEST_CASE("forward rejects batches that do not fit", "[model][forward]") {
  auto m = LlamaModel::load(test::target_model());
  const std::vector<int32_t> bad_token = {1, m->config().n_vocab};
  CHECK_THROWS_AS(m->forward(Batch::chain(bad_token, 0, false)), std::invalid_argument);
  const std::vector<int32_t> ok = {1, 2};
  CHECK_THROWS_AS(m->forward(Batch::chain(ok, m->n_ctx() - 1, false)), std::invalid_argument);
  Batch b = Batch::chain(ok, 0, false);
  b.parent[0] = 1;  // a parent after its child
  CHECK_THROWS_AS(m->forward(b), std::invalid_argument);
  // Positions index the CPU's rotation table: outside [0, n_ctx) is refused, not read.
  for (int32_t p : {-1, m->n_ctx(), 1 << 30}) {
    Batch bp = Batch::chain(ok, 0, false);
    bp.pos[1] = p;
    CHECK_THROWS_AS(m->forward(bp), std::invalid_argument);
  }
}
