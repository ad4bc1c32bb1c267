// MtpDrafter (engine/speculative/mtp_drafter.h) on a tiny random head bound to a tiny target:
// the context-row invariant (observe/sync/finished), greedy chains, dynamic trees whose
// temporary rows (tree attention) equal the same paths appended as real rows, exact
// enumeration of the acceptance rule over its sampled chains at T > 0, and the recipe's
// reference vectors (tests/data/drafters/mtp-ref.*).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>

#include "engine/drafters/mtp_fixture.h"
#include "engine/speculative/acceptance.h"
#include "engine/speculative/enumerate_choices.h"
#include "engine/speculative/mtp_drafter.h"
#include "test_data_files.h"

using namespace specchat;
using namespace specchat::test;

namespace {

const std::vector<int32_t> kCtx = {1, 517, 98, 3001, 42, 7, 1999, 260, 12, 845, 77, 3};

struct Setup {
  TempDir dir{"mtp-drafter"};
  TinyTarget t = tiny_target(dir);
  std::shared_ptr<const MtpModel> model;
  Setup() {
    random_mtp({}).write(dir.file("mtp.gguf"));
    model = MtpModel::load(dir.file("mtp.gguf"), *t.model);
  }
};

double max_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

std::vector<int32_t> path_to(const DraftTree& t, int32_t v) {
  std::vector<int32_t> p;
  for (; v >= 0; v = t.nodes[static_cast<size_t>(v)].parent) p.insert(p.begin(), t.nodes[static_cast<size_t>(v)].token);
  return p;
}


}  // namespace

TEST_CASE("mtp drafter: the context-row invariant (observe, sync, finished, clear)", "[unit][mtp]") {
  Setup s;
  LlamaModel& target = *s.t.model;
  const int d = target.config().d_model;
  const int32_t tap = target.config().n_layer - 1;
  MtpDrafter dr(s.model, target, 3);
  CHECK(dr.seq() == 3);
  Rng rng(1);
  TreeBudget chain;
  chain.node_budget = 3;
  // Nothing observed: an empty tree, not an error.
  CHECK(dr.propose(kCtx, chain, 8, SamplingParams{}, rng).empty());

  const std::vector<float> hid = target_hidden(target, kCtx, static_cast<int>(kCtx.size()) - 1);
  const std::vector<float> first5(hid.begin(), hid.begin() + 5 * d);
  SECTION("observe refuses gaps, size mismatches and a changed context") {
    CHECK_THROWS_AS(dr.observe(1, std::span<const int32_t>(kCtx).subspan(1, 6), hidden_rows(first5, tap, d)),
                    std::invalid_argument);
    CHECK_THROWS_AS(dr.observe(0, std::span<const int32_t>(kCtx).first(5), hidden_rows(first5, tap, d)),
                    std::invalid_argument);
    const int32_t other = tap - 1;
    CHECK_THROWS_AS(dr.observe(0, std::span<const int32_t>(kCtx).first(6), hidden_rows(first5, other, d)),
                    std::invalid_argument);
    dr.observe(0, std::span<const int32_t>(kCtx).first(6), hidden_rows(first5, tap, d));
    CHECK(dr.n_observed() == 5);
    std::vector<int32_t> changed(kCtx.begin() + 5, kCtx.begin() + 8);
    changed[0] = 9;  // not the successor recorded with row 4
    const std::vector<float> two(hid.begin() + 5 * d, hid.begin() + 7 * d);
    CHECK_THROWS_AS(dr.observe(5, changed, hidden_rows(two, tap, d)), std::invalid_argument);
    CHECK(dr.n_observed() == 5);
  }
  SECTION("sync and finished keep the rows of the shared prefix; clear drops all") {
    observe_context(dr, target, kCtx);
    REQUIRE(dr.n_observed() == static_cast<int>(kCtx.size()) - 1);
    const std::vector<float> before = dr.logits_after(kCtx, {});
    std::vector<int32_t> edited = kCtx;
    edited[5] = 9;  // rows 0..3 used ctx[0..4] only; row 4 paired t_4 with t_5
    dr.sync(edited);
    CHECK(dr.n_observed() == 4);
    CHECK(dr.propose(edited, chain, 8, SamplingParams{}, rng).empty());  // rows 4.. not observed yet
    // Back to the original context: re-observing the missing rows gives the same logits.
    dr.sync(kCtx);
    CHECK(dr.n_observed() == 4);
    observe_context(dr, target, kCtx);
    CHECK(max_diff(dr.logits_after(kCtx, {}), before) <= 1e-6);
    // finished with the context plus an unobserved reply keeps every held row.
    std::vector<int32_t> longer = kCtx;
    longer.push_back(100);
    longer.push_back(200);
    dr.finished(longer);
    CHECK(dr.n_observed() == static_cast<int>(kCtx.size()) - 1);
    dr.finished(std::span<const int32_t>(kCtx).first(4));
    CHECK(dr.n_observed() == 3);
    dr.clear();
    CHECK(dr.n_observed() == 0);
  }
}

TEST_CASE("mtp drafter: greedy chains follow the head's argmax, drafted rows are dropped", "[unit][mtp]") {
  Setup s;
  LlamaModel& target = *s.t.model;
  MtpDrafter dr(s.model, target, 0);
  observe_context(dr, target, kCtx);
  const int held = dr.n_observed();
  Rng rng(5);
  TreeBudget b;
  b.node_budget = 5;
  const DraftTree t = dr.propose(kCtx, b, 4, SamplingParams{}, rng);  // max_nodes 4 < budget 5
  REQUIRE(t.size() == 4);
  t.validate();
  CHECK(dr.n_observed() == held);
  std::vector<int32_t> path;
  for (int i = 0; i < t.size(); ++i) {
    const DraftNode& nd = t.nodes[static_cast<size_t>(i)];
    CHECK(nd.parent == i - 1);
    CHECK(t.child_mode[static_cast<size_t>(i)] == ChildSampling::deterministic);
    const std::vector<float> l = dr.logits_after(kCtx, path);
    const int32_t argmax = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    CHECK(nd.token == argmax);
    path.push_back(nd.token);
  }
  // Deterministic: the same tree again.
  const DraftTree t2 = dr.propose(kCtx, b, 4, SamplingParams{}, rng);
  REQUIRE(t2.size() == t.size());
  for (int i = 0; i < t.size(); ++i) CHECK(t2.nodes[static_cast<size_t>(i)].token == t.nodes[static_cast<size_t>(i)].token);
}

TEST_CASE("mtp drafter: dynamic trees, a node's temporary row equals its path appended as real rows",
          "[unit][mtp]") {
  Setup s;
  LlamaModel& target = *s.t.model;
  const int d = target.config().d_model;
  const int32_t tap = target.config().n_layer - 1;
  MtpDrafter dr(s.model, target, 0);
  observe_context(dr, target, kCtx);
  const int n = static_cast<int>(kCtx.size());
  Rng rng(9);
  TreeBudget b;
  b.mode = TreeMode::dynamic;
  b.node_budget = 10;
  b.depth = 4;
  b.branch = 3;
  const DraftTree tree = dr.propose(kCtx, b, 16, SamplingParams{0.7f, 0, 1.0f, 1}, rng);
  tree.validate();
  REQUIRE(tree.size() == 10);
  CHECK(tree.depth() >= 2);
  CHECK(dr.n_observed() == n - 1);
  const size_t nv = static_cast<size_t>(target.config().n_vocab);

  // Root children: the top-3 of the last context row, best first.
  const std::vector<float> root = dr.logits_after(kCtx, {});
  std::vector<int32_t> order(nv);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return root[static_cast<size_t>(a)] > root[static_cast<size_t>(c)]; });
  const std::vector<int32_t> kids = tree.children(0);
  REQUIRE(kids.size() == 3);
  for (size_t i = 0; i < kids.size(); ++i) CHECK(tree.nodes[static_cast<size_t>(kids[i])].token == order[i]);
  {
    // Each node's cumulative log-probability: its parent's plus log-softmax of the parent's row.
    const std::vector<float> all = dr.tree_logits(kCtx, tree);
    for (int32_t v = 0; v < tree.size(); ++v) {
      const DraftNode& nd = tree.nodes[static_cast<size_t>(v)];
      const std::vector<float> pl =
          nd.parent < 0 ? root
                        : std::vector<float>(all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(nd.parent) * nv),
                                             all.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(nd.parent + 1) * nv));
      const float mx = *std::max_element(pl.begin(), pl.end());
      double z = 0;
      for (float x : pl) z += std::exp(static_cast<double>(x - mx));
      const double lp = pl[static_cast<size_t>(nd.token)] - mx - std::log(z);
      const double base = nd.parent < 0 ? 0.0 : tree.nodes[static_cast<size_t>(nd.parent)].logp;
      CHECK(std::fabs(nd.logp - (base + lp)) <= 1e-4);
    }
  }

  // A deeper tree with siblings at every level (depth 4; tokens arbitrary), and the proposed one.
  DraftTree deep;
  deep.add(5, -1, 0);
  deep.add(6, -1, 0);
  deep.add(700, 0, 0);
  deep.add(701, 0, 0);
  deep.add(700, 1, 0);
  deep.add(4000, 2, 0);
  deep.add(4001, 2, 0);
  deep.add(17, 4, 0);
  deep.add(18, 5, 0);
  deep.add(19, 5, 0);
  deep.add(20, 6, 0);
  MtpDrafter real(s.model, target, 1);
  observe_context(real, target, kCtx);
  for (const DraftTree* t : std::vector<const DraftTree*>{&tree, &deep}) {
    const std::vector<float> all = dr.tree_logits(kCtx, *t);
    REQUIRE(all.size() == static_cast<size_t>(t->size()) * nv);
    CHECK(dr.n_observed() == n - 1);
    for (int32_t v = 0; v < t->size(); ++v) {
      const std::vector<int32_t> path = path_to(*t, v);
      INFO("node " << v << " depth " << path.size());
      const std::span<const float> mine(all.data() + static_cast<size_t>(v) * nv, nv);
      // (a) the same path as a chain of temporary rows (causal mask).
      CHECK(max_diff(mine, dr.logits_after(kCtx, path)) <= 1e-5);
      // (b) the path appended as real context rows: row n−2+j gets h = g of the row before.
      real.sync(kCtx);
      REQUIRE(real.n_observed() == n - 1);
      std::vector<int32_t> ext = kCtx;
      for (int32_t tok : path) {
        const int r = real.n_observed();
        const std::vector<float> h(real.row_output(r - 1).begin(), real.row_output(r - 1).end());
        const int32_t pair[2] = {ext.back(), tok};
        real.observe(r, pair, hidden_rows(h, tap, d));
        ext.push_back(tok);
      }
      CHECK(max_diff(mine, real.logits_after(ext, {})) <= 1e-5);
    }
  }
}

TEST_CASE("mtp drafter: static (Sequoia) shapes take the rank-th token of the parent's row", "[unit][mtp]") {
  Setup s;
  LlamaModel& target = *s.t.model;
  MtpDrafter dr(s.model, target, 0);
  observe_context(dr, target, kCtx);
  TreeBudget b;
  b.mode = TreeMode::optimal;
  b.node_budget = 16;
  // Level order (as SequoiaPlanner lists shapes), so tree node i is shape node i.
  b.shape_parent = {-1, -1, 0, 0, 1, 2};
  b.shape_rank = {0, 1, 0, 1, 2, 0};
  Rng rng(2);
  const DraftTree t = dr.propose(kCtx, b, 16, SamplingParams{}, rng);
  REQUIRE(t.size() == 6);
  t.validate();
  CHECK(dr.n_observed() == static_cast<int>(kCtx.size()) - 1);
  for (int32_t v = 0; v < t.size(); ++v) {
    const DraftNode& nd = t.nodes[static_cast<size_t>(v)];
    CHECK(nd.parent == b.shape_parent[static_cast<size_t>(v)]);
    const std::vector<float> l = dr.logits_after(kCtx, nd.parent < 0 ? std::vector<int32_t>{} : path_to(t, nd.parent));
    std::vector<int32_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return l[static_cast<size_t>(a)] > l[static_cast<size_t>(c)]; });
    CHECK(nd.token == order[static_cast<size_t>(b.shape_rank[static_cast<size_t>(v)])]);
  }
  // max_nodes cuts the shape.
  CHECK(dr.propose(kCtx, b, 3, SamplingParams{}, rng).size() == 3);
}

TEST_CASE("mtp drafter: acceptance over its sampled chains is exact at T > 0 (enumeration)", "[unit][mtp]") {
  Setup s;
  LlamaModel& target = *s.t.model;
  MtpDrafter dr(s.model, target, 0);
  const std::vector<int32_t> ctx(kCtx.begin(), kCtx.begin() + 7);
  observe_context(dr, target, ctx);
  const size_t n = ctx.size();
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = 4;
  // The verifying distribution p(c): the target's processed distribution mixed half and half
  // with the head's own q at c, so drafts are accepted as well as rejected (a random head and a
  // random target barely overlap). The rule must be exact for any p.
  std::map<std::vector<int32_t>, Distribution> memo;
  auto p_at = [&](const std::vector<int32_t>& c) -> const Distribution& {
    auto it = memo.find(c);
    if (it != memo.end()) return it->second;
    target.kv(0).truncate(0);
    const Distribution pt = process_logits(target.forward(Batch::chain(c, 0, false)), params);
    target.kv(0).truncate(0);
    const Distribution qh =
        process_logits(dr.logits_after(ctx, std::span<const int32_t>(c).subspan(n)), params);
    std::map<int32_t, double> mix;
    for (size_t i = 0; i < pt.ids.size(); ++i) mix[pt.ids[i]] += 0.5 * pt.probs[i];
    for (size_t i = 0; i < qh.ids.size(); ++i) mix[qh.ids[i]] += 0.5 * qh.probs[i];
    Distribution p;
    for (const auto& [id, pr] : mix) {
      p.ids.push_back(id);
      p.probs.push_back(pr);
    }
    return memo[c] = p;
  };
  for (int k : {1, 2, 3}) {
    INFO("chain of " << k);
    std::map<std::pair<int32_t, int32_t>, double> joint;
    double total = 0, accepted_mass = 0;
    ScriptedChoices c;
    do {
      c.restart();
      const DraftTree t = dr.propose_chain(ctx, k, params, c);
      REQUIRE(t.size() == k);
      // The recorded q is what each token was drawn from (B02).
      std::vector<int32_t> prefix;
      std::vector<Distribution> p;
      p.push_back(p_at(ctx));
      for (int i = 0; i < k; ++i) {
        REQUIRE(t.child_mode[static_cast<size_t>(i)] == ChildSampling::with_replacement);
        const Distribution q = process_logits(dr.logits_after(ctx, prefix), params);
        REQUIRE(t.child_q[static_cast<size_t>(i)].ids == q.ids);
        CHECK(max_diff(std::vector<float>(t.child_q[static_cast<size_t>(i)].probs.begin(), t.child_q[static_cast<size_t>(i)].probs.end()),
                       std::vector<float>(q.probs.begin(), q.probs.end())) <= 1e-6);
        prefix.push_back(t.nodes[static_cast<size_t>(i)].token);
        std::vector<int32_t> cc = ctx;
        cc.insert(cc.end(), prefix.begin(), prefix.end());
        p.push_back(p_at(cc));
      }
      const TreeOutcome o = accept_tree(t, p, false, c);
      std::vector<int32_t> emitted;
      for (int32_t v : o.path) emitted.push_back(t.nodes[static_cast<size_t>(v)].token);
      emitted.push_back(o.next_token);
      if (!o.path.empty()) accepted_mass += c.weight;
      if (emitted.size() >= 2) {
        joint[{emitted[0], emitted[1]}] += c.weight;
      } else {
        // The second token comes from the next step: the verifier given the first.
        std::vector<int32_t> cc = ctx;
        cc.push_back(emitted[0]);
        const Distribution& p1 = p_at(cc);
        for (size_t j = 0; j < p1.ids.size(); ++j) joint[{emitted[0], p1.ids[j]}] += c.weight * p1.probs[j];
      }
      total += c.weight;
    } while (c.advance());
    CHECK(std::fabs(total - 1.0) <= 1e-9);
    CHECK(accepted_mass > 0.05);  // both branches of the rule are exercised
    CHECK(accepted_mass < 0.95);
    // Exactness: P(x, y) = p(x | ctx) · p(y | ctx, x) for every pair.
    const Distribution& p0 = p_at(ctx);
    double worst = 0;
    std::map<std::pair<int32_t, int32_t>, double> want;
    for (size_t i = 0; i < p0.ids.size(); ++i) {
      std::vector<int32_t> cc = ctx;
      cc.push_back(p0.ids[i]);
      const Distribution& p1 = p_at(cc);
      for (size_t j = 0; j < p1.ids.size(); ++j) want[{p0.ids[i], p1.ids[j]}] += p0.probs[i] * p1.probs[j];
    }
    for (const auto& [xy, pr] : joint) worst = std::max(worst, std::fabs(pr - (want.count(xy) ? want[xy] : 0.0)));
    for (const auto& [xy, pr] : want) worst = std::max(worst, std::fabs(pr - (joint.count(xy) ? joint[xy] : 0.0)));
    INFO("max |P(x, y) − p(x) p(y|x)| = " << worst << " over " << want.size() << " pairs");
    CHECK(worst <= 1e-9);
  }
}

// The recipe's reference (resources/models/recipe/export_drafters.py --refs, tests/data/drafters/
// README.md): a random-weight head bound to the bundled target, and per case the logits of row
// n−2 after `ids`, then after each of `mtp_extra_tokens` appended as a recursive row.
TEST_CASE("mtp drafter: logits match the recipe's reference vectors", "[model][mtp]") {
  const std::string gguf = require_test_data("drafters/mtp-ref.gguf");
  std::ifstream in(require_test_data("drafters/ref.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  const double tol = ref.at("tolerance").get<double>();
  LlamaModel::Options o;
  o.n_ctx = 256;
  auto target = LlamaModel::load(target_model(), o);
  auto model = MtpModel::load(gguf, *target);  // also checks specchat.target.sha256
  REQUIRE(!ref.at("cases").empty());
  for (const auto& c : ref.at("cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const auto extra = c.at("mtp_extra_tokens").get<std::vector<int32_t>>();
    const auto& want = c.at("mtp_logits");
    REQUIRE(want.size() == extra.size() + 1);
    MtpDrafter dr(model, *target, 0);
    observe_context(dr, *target, ids);
    for (size_t j = 0; j <= extra.size(); ++j) {
      const auto w = want.at(j).get<std::vector<float>>();
      const std::vector<float> got = dr.logits_after(ids, std::span<const int32_t>(extra).first(j));
      const double diff = max_diff(got, w);
      INFO("case of " << ids.size() << " ids, depth " << j + 1 << ": max |diff| " << diff);
      CHECK(diff <= tol);
    }
  }
}
