// The block drafter (engine/speculative/block_drafter.h): trees and chains that TreeBuilder
// builds from a block's marginals are lossless (exact enumeration of every drafting draw and acceptance
// branch at T > 0, |P − p| ≤ 1e-9), their shapes follow the budget, and BlockDrafter keeps
// the context-row invariant of docs/design/target-feature-drafters.md on a tiny drafter.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "engine/drafters/dflash_fixture.h"
#include "engine/generator.h"
#include "engine/speculative/block_drafter.h"
#include "engine/speculative/enumerate_choices.h"
#include "engine/speculative/marginals_source.h"

using namespace specchat;

namespace {

using test::budget;

// Enumerates drafting (build_tree over the marginals, with its draws) and acceptance at T > 0 and checks
// that the first two emitted tokens follow the target exactly: P(y, z) = p(y | ctx) · p(z | ctx, y)
// (after a rejection at the root, the second token comes from the next step, which samples the
// target given the first: lossless by induction, as in test_acceptance.cpp).
void check_lossless(const std::vector<Distribution>& q, const TreeBudget& b, int max_nodes, bool sample,
                    test::SyntheticModel& target, int V) {
  const std::vector<int32_t> root_ctx = {0};
  std::map<std::pair<int, int>, double> joint;
  double total = 0;
  int runs = 0;
  test::enumerate([&](test::ScriptedChoices& c) {
    ++runs;
    test::MarginalsSource src(q, INT_MAX, true);  // as BlockDrafter's rows
    SamplingParams params;
    params.temperature = sample ? 1.0f : 0.0f;
    const DraftTree t = build_tree(src, b, max_nodes, params, c);
    t.validate();
    std::vector<std::vector<int32_t>> node_ctx;
    std::vector<Distribution> p{target.at(root_ctx)};
    for (const DraftNode& nd : t.nodes) {
      std::vector<int32_t> ctx = nd.parent < 0 ? root_ctx : node_ctx[static_cast<size_t>(nd.parent)];
      ctx.push_back(nd.token);
      p.push_back(target.at(ctx));
      node_ctx.push_back(std::move(ctx));
    }
    const TreeOutcome o = accept_tree(t, p, false, c);
    std::vector<int32_t> emitted;
    for (int32_t v : o.path) emitted.push_back(t.nodes[static_cast<size_t>(v)].token);
    emitted.push_back(o.next_token);
    if (emitted.size() >= 2) {
      joint[{emitted[0], emitted[1]}] += c.weight;
    } else {
      const Distribution& p1 = target.at({0, emitted[0]});
      for (size_t j = 0; j < p1.ids.size(); ++j) joint[{emitted[0], p1.ids[j]}] += c.weight * p1.probs[j];
    }
    total += c.weight;
  });
  REQUIRE(runs > 1);
  REQUIRE(std::fabs(total - 1.0) <= 1e-9);
  const Distribution& p0 = target.at(root_ctx);
  for (int y = 0; y < V; ++y) {
    const Distribution& p1 = target.at({0, y});
    double first = 0;
    for (int z = 0; z < V; ++z) {
      const auto it = joint.find({y, z});
      const double got = it == joint.end() ? 0.0 : it->second;
      first += got;
      INFO("tokens " << y << "," << z);
      CHECK(std::fabs(got - p0.prob(y) * p1.prob(z)) <= 1e-9);
    }
    CHECK(std::fabs(first - p0.prob(y)) <= 1e-9);
  }
}

}  // namespace

TEST_CASE("trees and chains from block marginals are exactly lossless (enumerated)", "[unit][acceptance][drafters]") {
  int checked = 0;
  for (int trial = 0; trial < 18; ++trial) {
    const int V = 3 + trial % 3;
    const bool sparse = trial % 2 == 1;
    test::SyntheticModel target{V, sparse, 300u + static_cast<uint32_t>(trial), {}};
    std::mt19937 g(900u + static_cast<uint32_t>(trial));
    std::vector<Distribution> q;  // the block's marginals q_1 … q_4, independent of drafted tokens
    for (int j = 0; j < 4; ++j) q.push_back(test::random_dist(g, V, sparse));
    INFO("trial " << trial << " V " << V << (sparse ? " sparse" : " dense"));
    // Deterministic top-k trees: dynamic (EAGLE-2 over the marginals) and a static shape.
    check_lossless(q, budget(TreeMode::dynamic, 6, 3, 2), 6, true, target, V);
    TreeBudget shape = budget(TreeMode::optimal, 5, 4, 3);
    shape.shape_parent = {-1, -1, 0, 0, 2};
    shape.shape_rank = {0, 1, 0, 1, 0};
    check_lossless(q, shape, 4, false, target, V);
    // Sampled chains (drawn from q_j, with replacement), with room for all or for 2.
    check_lossless(q, budget(TreeMode::chain, 3, 3, 1), 8, true, target, V);
    check_lossless(q, budget(TreeMode::chain, 4, 4, 1), 2, true, target, V);
    // Argmax chains verified at T > 0 (deterministic children).
    check_lossless(q, budget(TreeMode::chain, 3, 3, 1), 8, false, target, V);
    checked += 5;
  }
  CHECK(checked == 18 * 5);
}

namespace {

struct Fixture {
  std::shared_ptr<const DFlashModel> model;
  std::vector<int32_t> ids;  // committed context
  explicit Fixture(bool damaged = false) {
    test::DFlashSpec s;
    s.block_size = 6;
    s.nan_weight = damaged;
    model = DFlashModel::load(test::write_dflash(test::dflash_builder(s), damaged ? "block-drafter-nan" : "block-drafter"),
                              test::tiny_target());
    std::mt19937 g(3);
    ids.push_back(1);
    for (int i = 0; i < 13; ++i) ids.push_back(3 + static_cast<int32_t>(g() % 4000));
  }
  // Observes rows for ids[from, to) (one target forward with the drafter's taps), as the engine does.
  void observe(BlockDrafter& d, int from, int to) const {
    LlamaModel& t = test::tiny_target();
    t.kv(0).truncate(0);
    Batch b = Batch::chain(std::span<const int32_t>(ids).first(static_cast<size_t>(to)), 0, true);
    const Batch* one[1] = {&b};
    const std::vector<int32_t> taps = d.target_taps();
    const ForwardOut out = t.forward(one, taps);
    HiddenRows h;
    h.taps = taps;
    h.d_model = t.config().d_model;
    h.tap_stride = static_cast<size_t>(to) * static_cast<size_t>(h.d_model);
    h.data = out.hidden.data() + static_cast<size_t>(from) * static_cast<size_t>(h.d_model);
    h.n_rows = to - from;
    d.observe(from, std::span<const int32_t>(ids).subspan(static_cast<size_t>(from), static_cast<size_t>(to - from + 1)), h);
  }
};

}  // namespace

TEST_CASE("BlockDrafter keeps the context-row invariant and drafts from the block", "[unit][drafters]") {
  const Fixture fx;
  BlockDrafter d(fx.model);
  const int n = static_cast<int>(fx.ids.size());
  const std::span<const int32_t> ctx(fx.ids);
  CHECK(d.target_taps() == fx.model->config().taps);
  Rng rng(7);
  SamplingParams greedy;
  SECTION("no rows: empty tree") {
    CHECK(d.propose(ctx, budget(TreeMode::chain, 4, 4, 1), 10, greedy, rng).empty());
  }
  fx.observe(d, 0, 6);
  fx.observe(d, 6, n - 1);  // rows for every committed token but the last
  REQUIRE(d.n_observed() == n - 1);
  const int B = fx.model->block_size(), nv = 4096;
  // The block's logits for this context, straight from the model.
  std::vector<float> logits(static_cast<size_t>(B - 1) * nv);
  SECTION("greedy chain = the argmax of each marginal") {
    const DraftTree t = d.propose(ctx, budget(TreeMode::chain, 9, 9, 1), 100, greedy, rng);
    REQUIRE(t.size() == B - 1);
    // Recompute the block independently: rows from a second drafter's state.
    DFlashState st = fx.model->new_state();
    LlamaModel& tg = test::tiny_target();
    tg.kv(0).truncate(0);
    Batch b = Batch::chain(ctx.first(static_cast<size_t>(n - 1)), 0, true);
    const Batch* one[1] = {&b};
    const std::vector<int32_t> taps = fx.model->config().taps;
    const ForwardOut out = tg.forward(one, taps);
    HiddenRows h{taps, out.hidden.data(), static_cast<size_t>(n - 1) * 64, n - 1, 64};
    fx.model->append_context(st, 0, h);
    fx.model->draft_block(st, fx.ids.back(), n - 1, logits);
    for (int j = 0; j < B - 1; ++j) {
      CHECK(t.nodes[static_cast<size_t>(j)].token ==
            argmax(std::span<const float>(logits).subspan(static_cast<size_t>(j) * nv, nv)));
    }
    CHECK(d.n_observed() == n - 1);  // drafted rows are never kept
    // Room and budget.
    CHECK(d.propose(ctx, budget(TreeMode::chain, 9, 9, 1), 2, greedy, rng).size() == 2);
    CHECK(d.propose(ctx, budget(TreeMode::chain, 3, 9, 1), 100, greedy, rng).size() == 3);
    CHECK(d.propose(ctx, budget(TreeMode::chain, 3, 9, 1), 0, greedy, rng).empty());
    // A greedy tree branches (ranked by the drafter's softmax) and its first level is the top-2
    // of a block as wide as the tree is deep (anchor + 3 rows).
    const DraftTree tr = d.propose(ctx, budget(TreeMode::dynamic, 8, 3, 2), 100, greedy, rng);
    tr.validate();
    CHECK(tr.size() == 8);
    CHECK(tr.depth() <= 3);
    const auto kids = tr.children(0);
    REQUIRE(kids.size() == 2);
    fx.model->draft_block(st, fx.ids.back(), n - 1, logits, 3, 4);
    CHECK(tr.nodes[static_cast<size_t>(kids[0])].token == argmax(std::span<const float>(logits).first(nv)));
  }
  SECTION("sampled chain: drawn from the processed marginals") {
    SamplingParams p;
    p.temperature = 0.8f;
    p.top_k = 20;
    const DraftTree t = d.propose(ctx, budget(TreeMode::chain, 4, 4, 1), 100, p, rng);
    REQUIRE(t.size() == 4);
    for (int j = 0; j < 4; ++j) {
      CHECK(t.child_mode[static_cast<size_t>(j)] == ChildSampling::with_replacement);
      CHECK(t.child_q[static_cast<size_t>(j)].ids.size() == 20);
      CHECK(t.child_q[static_cast<size_t>(j)].prob(t.nodes[static_cast<size_t>(j)].token) > 0);
    }
  }
  SECTION("sync and propose keep the rows of the shared prefix, at most n − 1") {
    std::vector<int32_t> other(fx.ids);
    other[5] = other[5] == 7 ? 8 : 7;
    d.sync(other);
    CHECK(d.n_observed() == 5);
    d.clear();
    CHECK(d.n_observed() == 0);
    fx.observe(d, 0, n - 1);
    d.sync(ctx.first(4));
    CHECK(d.n_observed() == 3);
    fx.observe(d, 3, n - 1);
    CHECK(d.n_observed() == n - 1);
    // A context that diverges inside the rows: propose cuts them and still drafts.
    other.resize(9);
    CHECK(!d.propose(other, budget(TreeMode::chain, 2, 2, 1), 10, greedy, rng).empty());
    CHECK(d.n_observed() == 5);
  }
  SECTION("finished keeps the prefix shared with the final context") {
    std::vector<int32_t> fin(fx.ids.begin(), fx.ids.begin() + 8);
    fin.push_back(fx.ids[8] == 9 ? 10 : 9);
    d.finished(fin);
    CHECK(d.n_observed() == 8);
    d.finished(ctx);
    CHECK(d.n_observed() == 8);
  }
  SECTION("observe refuses gaps and size mismatches") {
    const test::OwnedHidden h = test::random_hidden(fx.model->config().taps, 2, 64, 1);
    CHECK_THROWS_AS(d.observe(n, ctx.subspan(0, 3), h.view()), std::invalid_argument);
    CHECK_THROWS_AS(d.observe(n - 1, ctx.subspan(0, 2), h.view()), std::invalid_argument);
    CHECK(d.n_observed() == n - 1);
  }
}

TEST_CASE("BlockDrafter: a drafter with a NaN weight is refused with a typed error, not drafted from", "[unit][drafters]") {
  // Every block row goes through the NaN output norm: all drafted logits are NaN.
  const Fixture fx(true);
  BlockDrafter d(fx.model);
  const int n = static_cast<int>(fx.ids.size());
  fx.observe(d, 0, n - 1);
  Rng rng(7);
  try {
    d.propose(std::span<const int32_t>(fx.ids), budget(TreeMode::chain, 4, 4, 1), 100, SamplingParams{}, rng);
    FAIL("no error for NaN drafter logits");
  } catch (const GenerationError& e) {
    CHECK(e.kind() == "non_finite_draft_logits");
  }
}
