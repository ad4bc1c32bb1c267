// TreeBuilder (engine/speculative/tree_builder.h) on synthetic sources: the shapes follow the
// budget, the rounds are what each shape asks for (chain: one slot per round; dynamic: the
// best `branch` nodes of the newest level; static: the parents of the next level), the room
// bounds the scored nodes, and the kept nodes are the best by cumulative log-probability.
// The exactness of trees built over marginals is in test_block_drafter.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>

#include "engine/speculative/enumerate_choices.h"
#include "engine/speculative/marginals_source.h"
#include "engine/speculative/tree_builder.h"

using namespace specchat;

namespace {

using test::budget;

std::vector<Distribution> marginals(uint32_t seed, int depths, int V) {
  std::mt19937 g(seed);
  std::vector<Distribution> q;
  for (int j = 0; j < depths; ++j) q.push_back(test::random_dist(g, V, false));
  return q;
}

SamplingParams greedy() { return SamplingParams{}; }
SamplingParams sampled() {
  SamplingParams p;
  p.temperature = 1.0f;
  return p;
}

// A source with candidates but no distributions (as the n-gram drafter).
class RankOnly final : public NodeSource {
 public:
  explicit RankOnly(std::vector<Distribution> q) : m_(std::move(q)) {}
  void score(const DraftTree& t, std::span<const int32_t> slots) override { m_.score(t, slots); }
  void top(int r, int k, std::vector<Candidate>& out) override { m_.top(r, k, out); }

 private:
  test::MarginalsSource m_;
};

}  // namespace

TEST_CASE("TreeBuilder chains: argmax, drawn or top-1, one slot per round", "[unit][trees]") {
  const auto q = marginals(5, 6, 10);
  Rng rng(3);
  RngChoices ch(rng);
  SECTION("greedy: the argmax of each depth's q, deterministic children") {
    test::MarginalsSource src(q);
    const DraftTree t = build_tree(src, budget(TreeMode::chain, 4, 1, 1), 100, greedy(), ch);
    t.validate();
    REQUIRE(t.size() == 4);
    double logp = 0;
    for (int j = 0; j < 4; ++j) {
      const DraftNode& nd = t.nodes[static_cast<size_t>(j)];
      CHECK(nd.token == q[static_cast<size_t>(j)].ids[0]);
      CHECK(nd.parent == j - 1);
      logp += std::log(q[static_cast<size_t>(j)].probs[0]);
      CHECK(nd.logp == Approx(logp).margin(1e-12));
      CHECK(t.child_mode[static_cast<size_t>(j)] == ChildSampling::deterministic);
    }
    // Rounds: the root, then each node but the last.
    REQUIRE(src.rounds.size() == 4);
    for (int j = 0; j < 4; ++j) CHECK(src.rounds[static_cast<size_t>(j)] == std::vector<int32_t>{j});
  }
  SECTION("sampled: drawn from q, with replacement, q recorded") {
    test::MarginalsSource src(q);
    const DraftTree t = build_tree(src, budget(TreeMode::chain, 3, 1, 1), 100, sampled(), ch);
    REQUIRE(t.size() == 3);
    for (int j = 0; j < 3; ++j) {
      CHECK(t.child_mode[static_cast<size_t>(j)] == ChildSampling::with_replacement);
      CHECK(t.child_q[static_cast<size_t>(j)].ids == q[static_cast<size_t>(j)].ids);
      CHECK(q[static_cast<size_t>(j)].prob(t.nodes[static_cast<size_t>(j)].token) > 0);
    }
  }
  SECTION("a source without distributions: top-1, deterministic, even when sampling") {
    RankOnly src(q);
    const DraftTree t = build_tree(src, budget(TreeMode::chain, 3, 1, 1), 100, sampled(), ch);
    REQUIRE(t.size() == 3);
    for (int j = 0; j < 3; ++j) {
      CHECK(t.nodes[static_cast<size_t>(j)].token == q[static_cast<size_t>(j)].ids[0]);
      CHECK(t.child_mode[static_cast<size_t>(j)] == ChildSampling::deterministic);
    }
  }
  SECTION("budget, room left in the context, the source's room, no more depths") {
    test::MarginalsSource a(q), b(q), c(q, 2), d(q), e(q);
    CHECK(build_tree(a, budget(TreeMode::chain, 9, 1, 1), 2, greedy(), ch).size() == 2);
    CHECK(build_tree(b, budget(TreeMode::chain, 0, 1, 1), 9, greedy(), ch).empty());
    CHECK(b.rounds.empty());
    // Room for 2 scored nodes: the root's round and two more, three tokens.
    CHECK(build_tree(c, budget(TreeMode::chain, 9, 1, 1), 100, greedy(), ch).size() == 3);
    CHECK(c.scored == 2);
    CHECK(build_tree(d, budget(TreeMode::chain, 9, 1, 1), 100, greedy(), ch).size() == 6);  // 6 depths
    CHECK(build_tree(e, budget(TreeMode::chain, 4, 1, 1), 0, greedy(), ch).empty());
  }
}

TEST_CASE("TreeBuilder dynamic trees: EAGLE-2 rounds, the best nodes kept", "[unit][trees]") {
  const auto q = marginals(11, 6, 12);
  Rng rng(1);
  RngChoices ch(rng);
  for (const auto& [n, depth, branch, room] : {std::tuple{10, 3, 3, 100}, std::tuple{7, 5, 2, 100},
                                                std::tuple{20, 4, 4, 5}, std::tuple{1, 1, 1, 100},
                                                std::tuple{30, 6, 3, 100}}) {
    INFO("n " << n << " depth " << depth << " branch " << branch << " room " << room);
    test::MarginalsSource src(q);
    TreeBuilder tb(budget(TreeMode::dynamic, n, depth, branch), room, greedy());
    while (!tb.wanted().empty()) {
      src.score(tb.tree(), tb.wanted());
      tb.advance(src, ch);
    }
    const DraftTree all = tb.tree();
    std::vector<int32_t> from;
    const DraftTree t = tb.finish(&from);
    t.validate();
    // Rounds: the root, then at most `branch` nodes of one level each, `depth` rounds at most.
    REQUIRE(!src.rounds.empty());
    CHECK(src.rounds[0] == std::vector<int32_t>{0});
    CHECK(static_cast<int>(src.rounds.size()) <= depth);
    for (size_t r = 1; r < src.rounds.size(); ++r) {
      const auto& slots = src.rounds[r];
      CHECK(static_cast<int>(slots.size()) <= branch);
      // The scored nodes are the best of their level (depth r) by cumulative log-probability.
      double worst_in = 0;
      for (size_t i = 0; i < slots.size(); ++i) {
        const DraftNode& nd = all.nodes[static_cast<size_t>(slots[i] - 1)];
        CHECK(nd.depth == static_cast<int>(r));
        worst_in = i == 0 ? nd.logp : std::min(worst_in, nd.logp);
      }
      for (int32_t v = 0; v < all.size(); ++v) {
        const DraftNode& nd = all.nodes[static_cast<size_t>(v)];
        if (nd.depth != static_cast<int>(r) || std::find(slots.begin(), slots.end(), v + 1) != slots.end()) continue;
        CHECK(nd.logp <= worst_in + 1e-12);
      }
    }
    // Every scored slot got its top-`branch` children, with cumulative log q.
    for (int32_t v = 0; v < all.size(); ++v) {
      const DraftNode& nd = all.nodes[static_cast<size_t>(v)];
      const Distribution& qd = q[static_cast<size_t>(nd.depth - 1)];
      const double base = nd.parent < 0 ? 0.0 : all.nodes[static_cast<size_t>(nd.parent)].logp;
      CHECK(nd.logp == Approx(base + std::log(qd.prob(nd.token))).margin(1e-12));
    }
    // The result: min(n, room, generated) nodes, the best by logp, each mapped to its source node.
    CHECK(t.size() == std::min({n, room, all.size()}));
    REQUIRE(from.size() == t.nodes.size());
    double worst_kept = 0;
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      const DraftNode& src_node = all.nodes[static_cast<size_t>(from[i])];
      CHECK(t.nodes[i].token == src_node.token);
      CHECK(t.nodes[i].logp == src_node.logp);
      CHECK(t.nodes[i].depth == src_node.depth);
      worst_kept = i == 0 ? t.nodes[i].logp : std::min(worst_kept, t.nodes[i].logp);
    }
    for (int32_t v = 0; v < all.size(); ++v) {
      if (std::find(from.begin(), from.end(), v) == from.end()) CHECK(all.nodes[static_cast<size_t>(v)].logp <= worst_kept + 1e-12);
    }
    for (int s = 0; s <= t.size(); ++s) CHECK(t.child_mode[static_cast<size_t>(s)] == ChildSampling::deterministic);
  }
  SECTION("the source's room ends the expansion") {
    test::MarginalsSource src(q, 3);
    const DraftTree t = build_tree(src, budget(TreeMode::dynamic, 30, 5, 3), 100, greedy(), ch);
    CHECK(src.scored <= 3);
    CHECK(t.depth() == 2);  // the root's children, then one round of 3: no room for another
  }
}

// Sources whose scoring is free (a block's marginals, n-gram lookup): the tree grows best-first
// over the whole frontier, so it is the best the budget allows over the ranking.
TEST_CASE("TreeBuilder dynamic trees over free scoring: best-first", "[unit][trees]") {
  const auto q = marginals(4, 5, 12);
  Rng rng(1);
  RngChoices ch(rng);
  for (const auto& [n, depth, branch, room] : {std::tuple{10, 3, 3, 100}, std::tuple{7, 9, 2, 100},
                                                std::tuple{20, 4, 4, 5}, std::tuple{1, 1, 1, 100}}) {
    INFO("n " << n << " depth " << depth << " branch " << branch << " room " << room);
    test::MarginalsSource src(q, INT_MAX, true);
    const DraftTree t = build_tree(src, budget(TreeMode::dynamic, n, depth, branch), room, greedy(), ch);
    t.validate();
    const int max_depth = std::min<int>(depth, static_cast<int>(q.size()));
    CHECK(t.size() == std::min(n, room));  // enough candidates for every budget here
    CHECK(t.depth() <= max_depth);
    double worst_in = 0;
    for (size_t i = 0; i < t.nodes.size(); ++i) {
      const DraftNode& nd = t.nodes[i];
      const Distribution& qd = q[static_cast<size_t>(nd.depth - 1)];
      const double base = nd.parent < 0 ? 0.0 : t.nodes[static_cast<size_t>(nd.parent)].logp;
      CHECK(nd.logp == Approx(base + std::log(qd.prob(nd.token))).margin(1e-12));
      worst_in = i == 0 ? nd.logp : std::min(worst_in, nd.logp);
    }
    // Children of each slot: a prefix of q's top-`branch` at that depth, in order; and every
    // candidate left out scores no better than the worst node taken.
    for (int slot = 0; slot <= t.size(); ++slot) {
      const int dep = slot == 0 ? 1 : t.nodes[static_cast<size_t>(slot - 1)].depth + 1;
      if (dep > max_depth) continue;
      const std::vector<int32_t> kids = t.children(slot);
      const Distribution& qd = q[static_cast<size_t>(dep - 1)];
      for (size_t k = 0; k < kids.size(); ++k) CHECK(t.nodes[static_cast<size_t>(kids[k])].token == qd.ids[k]);
      const double base = slot == 0 ? 0.0 : t.nodes[static_cast<size_t>(slot - 1)].logp;
      for (size_t k = kids.size(); k < std::min<size_t>(static_cast<size_t>(branch), qd.ids.size()); ++k) {
        CHECK(base + std::log(qd.probs[k]) <= worst_in + 1e-12);
      }
    }
    // One node scored per round (after the root's).
    for (const auto& r : src.rounds) CHECK(r.size() == 1);
  }
}

TEST_CASE("TreeBuilder static shapes: rank-th candidate of the parent's row, level by level", "[unit][trees]") {
  const auto q = marginals(21, 4, 8);
  Rng rng(1);
  RngChoices ch(rng);
  TreeBudget b = budget(TreeMode::optimal, 16, 4, 1);
  //            node: 0   1   2  3  4  5  6
  b.shape_parent = {-1, -1, 0, 0, 1, 2, 5};
  b.shape_rank = {0, 1, 0, 1, 0, 0, 0};
  SECTION("the whole shape") {
    test::MarginalsSource src(q);
    const DraftTree t = build_tree(src, b, 100, greedy(), ch);
    t.validate();
    REQUIRE(t.size() == 7);
    for (int i = 0; i < 7; ++i) {
      const DraftNode& nd = t.nodes[static_cast<size_t>(i)];
      CHECK(nd.parent == b.shape_parent[static_cast<size_t>(i)]);
      CHECK(nd.token == q[static_cast<size_t>(nd.depth - 1)].ids[static_cast<size_t>(b.shape_rank[static_cast<size_t>(i)])]);
    }
    // Rounds: the root, then the parents of each next level in one round.
    REQUIRE(src.rounds.size() == 4);
    CHECK(src.rounds[1] == std::vector<int32_t>{1, 2});
    CHECK(src.rounds[2] == std::vector<int32_t>{3});
    CHECK(src.rounds[3] == std::vector<int32_t>{6});
  }
  SECTION("cut by max_nodes; a rank past the candidates is skipped with its subtree") {
    test::MarginalsSource src(q);
    CHECK(build_tree(src, b, 3, greedy(), ch).size() == 3);
    TreeBudget far = b;
    far.shape_rank[2] = 50;  // node 2 cannot exist: nodes 5 and 6 go too
    test::MarginalsSource src2(q);
    const DraftTree t = build_tree(src2, far, 100, greedy(), ch);
    t.validate();
    CHECK(t.size() == 4);
  }
  SECTION("a shape listing a child before its parent is refused") {
    TreeBudget bad = b;
    bad.shape_parent[1] = 3;
    CHECK_THROWS_AS(TreeBuilder(bad, 100, greedy()), std::invalid_argument);
    TreeBudget empty = b;
    empty.shape_parent.clear();
    CHECK(TreeBuilder(empty, 100, greedy()).wanted().empty());
  }
}

namespace {

// LogitsSource over fixed rows of logits.
class FixedLogits final : public LogitsSource {
 public:
  FixedLogits(std::vector<float> logits, size_t n_vocab) : logits_(std::move(logits)) {
    set_rows(logits_, n_vocab, n_vocab);
  }
  void score(const DraftTree&, std::span<const int32_t>) override {}

 private:
  std::vector<float> logits_;
};

}  // namespace

TEST_CASE("LogitsSource::top gives the softmax log-probabilities of the best k with ties to the lower id", "[unit][trees]") {
  const size_t V = 1000;  // not a multiple of 16: the kernels' tails
  std::mt19937 g(21);
  std::normal_distribution<float> nd(0, 4);
  std::vector<float> row(V);
  for (auto& v : row) v = nd(g);
  row[700] = row[37] = 40.0f;  // a tie for the maximum: 37 first
  row[500] = 39.5f;
  row[3] = -std::numeric_limits<float>::infinity();
  long double s = 0;
  for (float v : row) s += std::exp(static_cast<long double>(v) - 40.0L);
  const long double lse = 40.0L + std::log(s);
  FixedLogits src(row, V);
  std::vector<Candidate> got;
  for (int k : {1, 3}) {
    src.top(0, k, got);
    REQUIRE(got.size() == static_cast<size_t>(k));
    const int32_t want_ids[] = {37, 700, 500};
    for (int i = 0; i < k; ++i) {
      INFO("k " << k << " rank " << i);
      CHECK(got[static_cast<size_t>(i)].token == want_ids[i]);
      CHECK(got[static_cast<size_t>(i)].logp ==
            Approx(static_cast<double>(row[static_cast<size_t>(want_ids[i])] - lse)).margin(1e-6));
    }
  }
}
