// Hidden states from the forward (block drafters, MTP heads and PIPO read them) against the
// training framework's values (tests/data/reference_hidden.json, written by
// resources/models/recipe/reference_hidden.py), for single rows, chains, tree batches and
// batches of several sequences.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "model_fixture.h"

using namespace specchat;

namespace {

using test::max_abs_diff;

nlohmann::json reference() {
  std::ifstream in(test::test_data("reference_hidden.json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// Rows of hidden-state layer h for output row j: [d_model].
std::span<const float> hidden_row(const ForwardOut& o, size_t h, size_t n_out, size_t j, size_t d) {
  return o.hidden.subspan((h * n_out + j) * d, d);
}

}  // namespace

TEST_CASE("hidden states of two layers and the final norm match the recipe's reference", "[model][forward][hidden]") {
  const nlohmann::json ref = reference();
  // PyTorch f32 on the same F16 weights; values stored with 6 significant digits (|h| < 25, so
  // ≤ 5e-5 rounding) and f32 summation order: 1e-3 absolute, as for the logits.
  const double tol = ref.at("tolerance").get<double>();
  for (const char* role : {"target", "draft"}) {
    const std::string path = std::string(role) == "target" ? test::target_model() : test::draft_model();
    LlamaModel::Options o;
    o.n_seq = 2;
    o.kv_type = DType::f32;  // the reference keeps K/V in f32 (an f16 cache adds ~1e-3)
    auto m = LlamaModel::load(path, o);
    const size_t d = static_cast<size_t>(m->config().d_model);
    for (const auto& c : ref.at("cases")) {
      const auto ids = c.at("ids").get<std::vector<int32_t>>();
      const auto positions = c.at("positions").get<std::vector<int>>();
      const auto layers = c.at(role).at("layers").get<std::vector<int32_t>>();
      const auto& want = c.at(role).at("hidden");
      INFO(role << " prompt '" << c.at("text").get<std::string>() << "'");

      // 1. One chain batch, rows at the reference positions.
      m->kv(0).truncate(0);
      Batch b = Batch::chain(ids, 0, false);
      b.out_rows.assign(positions.begin(), positions.end());
      const Batch* one[1] = {&b};
      const ForwardOut out = m->forward(one, layers);
      REQUIRE(out.hidden.size() == layers.size() * positions.size() * d);
      for (size_t h = 0; h < layers.size(); ++h) {
        for (size_t j = 0; j < positions.size(); ++j) {
          INFO("layer " << layers[h] << " position " << positions[j]);
          CHECK(max_abs_diff(hidden_row(out, h, positions.size(), j, d), want.at(h).at(j).get<std::vector<float>>()) <= tol);
        }
      }

      // 2. Single rows: the prefix fed first, then the last position alone (decode), while a
      //    second sequence with other tokens shares the forward.
      const int last = positions.back();
      m->kv(0).truncate(0);
      m->sync_cache(ids, last, false, 0);
      Batch row = Batch::chain(std::span(ids).subspan(static_cast<size_t>(last), 1), last, false);
      row.seq = 0;
      std::vector<int32_t> other_ids = {1, 17, 300, 41, 9};
      m->kv(1).truncate(0);
      Batch other = Batch::chain(other_ids, 0, true);
      other.seq = 1;
      const Batch* two[2] = {&other, &row};
      const ForwardOut out2 = m->forward(two, layers);
      const size_t n_out2 = other.out_rows.size() + 1;
      for (size_t h = 0; h < layers.size(); ++h) {
        INFO("decode row, layer " << layers[h]);
        CHECK(max_abs_diff(hidden_row(out2, h, n_out2, n_out2 - 1, d),
                           want.at(h).at(positions.size() - 1).get<std::vector<float>>()) <= tol);
      }
    }
  }
}

TEST_CASE("hidden states of a tree batch equal those of each node's path fed as a chain", "[model][forward][hidden]") {
  auto m = LlamaModel::load(test::target_model());
  const size_t d = static_cast<size_t>(m->config().d_model);
  const std::vector<int32_t> prefix = {1, 500, 37, 1200, 9};
  // Tree after the prefix's last token: root children a, b; a's child c.
  const int32_t a = 77, bb = 3000, cc = 15;
  const std::vector<int32_t> layers = {0, 3, kHiddenFinalNorm};
  m->kv().truncate(0);
  m->sync_cache(prefix, 4, false);
  Batch t;
  t.tokens = {prefix[4], a, bb, cc};
  t.pos = {4, 5, 5, 6};
  t.parent = {-1, 0, 0, 1};
  t.kv_pos0 = 4;
  t.out_rows = {0, 1, 2, 3};
  const Batch* one[1] = {&t};
  const ForwardOut tree = m->forward(one, layers);
  std::vector<float> tree_hidden(tree.hidden.begin(), tree.hidden.end());
  // Each path as a plain chain.
  const std::vector<std::vector<int32_t>> paths = {{prefix[4]}, {prefix[4], a}, {prefix[4], bb}, {prefix[4], a, cc}};
  for (size_t node = 0; node < paths.size(); ++node) {
    m->kv().truncate(4);
    Batch c = Batch::chain(paths[node], 4, false);
    const Batch* cb[1] = {&c};
    const ForwardOut chain = m->forward(cb, layers);
    for (size_t h = 0; h < layers.size(); ++h) {
      INFO("node " << node << " layer " << layers[h]);
      const std::span<const float> got(tree_hidden.data() + (h * 4 + node) * d, d);
      const std::span<const float> want = hidden_row(chain, h, 1, 0, d);
      CHECK(max_abs_diff(got, std::vector<float>(want.begin(), want.end())) <= 1e-5);
    }
  }
}

TEST_CASE("hidden-state requests out of range are refused", "[model][forward][hidden]") {
  auto m = LlamaModel::load(test::draft_model());
  const std::vector<int32_t> ids = {1, 2, 3};
  Batch b = Batch::chain(ids, 0, true);
  const Batch* one[1] = {&b};
  const int32_t bad[1] = {m->config().n_layer};
  CHECK_THROWS_AS(m->forward(one, bad), std::invalid_argument);
  const int32_t neg[1] = {-2};
  CHECK_THROWS_AS(m->forward(one, neg), std::invalid_argument);
  b.seq = 1;  // a single-sequence model has no sequence 1
  CHECK_THROWS_AS(m->forward(b), std::invalid_argument);
}

TEST_CASE("hidden rows apart from out rows: every row's hidden state, the last row's logits", "[model][forward][hidden]") {
  auto m = LlamaModel::load(test::target_model());
  const size_t nv = static_cast<size_t>(m->config().n_vocab);
  const std::vector<int32_t> ids = {1, 500, 37, 1200, 9, 44};
  const int32_t layers[2] = {1, m->config().n_layer - 1};
  Batch all = Batch::chain(ids, 0, true);
  const Batch* a1[1] = {&all};
  const ForwardOut full = m->forward(a1, layers);
  const std::vector<float> full_hidden(full.hidden.begin(), full.hidden.end());
  const std::vector<float> last_logits(full.logits.end() - static_cast<ptrdiff_t>(nv), full.logits.end());
  m->kv().truncate(0);
  Batch split = Batch::chain(ids, 0, false);  // logits of the last row only
  for (int i = 0; i < static_cast<int>(ids.size()); ++i) split.hidden_rows.push_back(i);
  const Batch* a2[1] = {&split};
  const ForwardOut part = m->forward(a2, layers);
  REQUIRE(part.logits.size() == nv);
  REQUIRE(part.hidden.size() == full_hidden.size());
  CHECK(max_abs_diff(part.hidden, full_hidden) == 0.0);
  CHECK(max_abs_diff(part.logits, last_logits) == 0.0);
  // The final norm's output exists for out rows only.
  m->kv().truncate(0);
  const int32_t fin[1] = {kHiddenFinalNorm};
  CHECK_THROWS_AS(m->forward(a2, fin), std::invalid_argument);
  split.hidden_rows = {7};
  CHECK_THROWS_AS(m->forward(a2, layers), std::invalid_argument);
}
