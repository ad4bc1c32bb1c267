// The acceptance rule on synthetic distributions: crafted greedy cases, and exact enumeration
// of every random branch of accept_tree itself over small vocabularies and trees of depth <= 3
// with every child-sampling variant (issue 3: |P(first token) − p| <= 1e-9, deeper marginals too).
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "engine/speculative/acceptance.h"
#include "stats_util.h"

using namespace specchat;

namespace {

Distribution one_hot(int32_t id) { return Distribution{{id}, {1.0}}; }

Distribution random_dist(std::mt19937& g, int n_vocab, bool sparse) {
  Distribution d;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) {
    double w = u(g);
    if (sparse && u(g) < 0.35) w = 0;  // top-k / top-p style holes
    if (w > 0) {
      d.ids.push_back(i);
      d.probs.push_back(w);
      sum += w;
    }
  }
  if (d.ids.empty()) return one_hot(static_cast<int32_t>(g() % static_cast<unsigned>(n_vocab)));
  for (double& p : d.probs) p /= sum;
  return d;
}

// Replays accept_tree with a scripted sequence of choices, enumerating every branch with its
// probability (depth-first over choice sequences): tests the real code path exactly.
class ScriptedChoices : public Choices {
 public:
  std::vector<int> script;       // choice index per decision, extended as new decisions appear
  std::vector<int> arity;        // number of alternatives at each decision
  size_t pos = 0;
  double weight = 1.0;
  bool bernoulli(double p) override {
    const int c = next(2);
    weight *= c == 0 ? p : 1.0 - p;
    return c == 0;
  }
  int32_t draw(const Distribution& d) override {
    const int c = next(static_cast<int>(d.ids.size()));
    weight *= d.probs[static_cast<size_t>(c)];
    return d.ids[static_cast<size_t>(c)];
  }
  // Advances to the next choice sequence; false when all were visited.
  bool advance() {
    while (!script.empty()) {
      if (script.back() + 1 < arity.back()) {
        ++script.back();
        return true;
      }
      script.pop_back();
      arity.pop_back();
    }
    return false;
  }
  void restart() {
    pos = 0;
    weight = 1.0;
  }

 private:
  int next(int n) {
    if (pos == script.size()) {
      script.push_back(0);
      arity.push_back(n);
    }
    return script[pos++];
  }
};

// Enumerates all outcomes of f (which makes its random decisions through `c`), calling
// on_outcome(weight) after each complete run.
void enumerate(const std::function<void(ScriptedChoices&)>& f) {
  ScriptedChoices c;
  do {
    c.restart();
    f(c);
  } while (c.advance());
}

// A synthetic model: a fixed random distribution for every context (memoised by context).
struct SyntheticModel {
  int V;
  bool sparse;
  uint32_t seed;
  std::map<std::vector<int32_t>, Distribution> memo;
  const Distribution& at(const std::vector<int32_t>& ctx) {
    auto it = memo.find(ctx);
    if (it != memo.end()) return it->second;
    uint32_t h = seed;
    for (int32_t t : ctx) h = h * 1000003u + static_cast<uint32_t>(t) + 17u;
    std::mt19937 g(h);
    return memo[ctx] = random_dist(g, V, sparse);
  }
};

}  // namespace

TEST_CASE("greedy tree acceptance: crafted cases", "[unit][acceptance]") {
  Rng rng(1);
  RngChoices none(rng);  // greedy draws nothing
  // Tree: root -> a(5) -> b(6) ; root -> c(8) -> d(9) -> e(4)
  DraftTree t;
  const int a = t.add(5, -1, 0), b = t.add(6, a, 0), c = t.add(8, -1, 0), d = t.add(9, c, 0);
  const int e = t.add(4, d, 0);
  auto p_for = [&](int32_t root, int32_t at_a, int32_t at_b, int32_t at_c, int32_t at_d, int32_t at_e) {
    return std::vector<Distribution>{one_hot(root), one_hot(at_a), one_hot(at_b), one_hot(at_c), one_hot(at_d), one_hot(at_e)};
  };
  SECTION("perfect match on the first branch, bonus at its leaf") {
    const auto o = accept_tree(t, p_for(5, 6, 7, 0, 0, 0), true, none);
    CHECK(o.path == std::vector<int32_t>{a, b});
    CHECK(o.next_token == 7);
  }
  SECTION("first branch mismatches early, the second matches deeper") {
    const auto o = accept_tree(t, p_for(8, 1, 1, 9, 4, 3), true, none);
    CHECK(o.path == std::vector<int32_t>{c, d, e});
    CHECK(o.next_token == 3);
  }
  SECTION("all rejected: the target's own token") {
    const auto o = accept_tree(t, p_for(2, 6, 7, 9, 4, 3), true, none);
    CHECK(o.path.empty());
    CHECK(o.next_token == 2);
  }
  SECTION("empty tree: budget 0 equals plain decoding") {
    const auto o = accept_tree(DraftTree{}, std::vector<Distribution>{one_hot(3)}, true, none);
    CHECK(o.path.empty());
    CHECK(o.next_token == 3);
  }
  SECTION("budget 1 (one node) accepts it or corrects it") {
    DraftTree one;
    one.add(5, -1, 0);
    CHECK(accept_tree(one, std::vector<Distribution>{one_hot(5), one_hot(2)}, true, none).next_token == 2);
    CHECK(accept_tree(one, std::vector<Distribution>{one_hot(4), one_hot(2)}, true, none).next_token == 4);
  }
}

TEST_CASE("residual and remove_token", "[unit][acceptance]") {
  const Distribution p{{0, 1, 2}, {0.5, 0.3, 0.2}};
  const Distribution q{{0, 1, 3}, {0.2, 0.6, 0.2}};
  const Distribution r = residual(p, q);  // p - q = {0.3, -0.3, 0.2, -0.2} -> {0.3, 0, 0.2} / 0.5
  CHECK(r.prob(0) == Approx(0.6).margin(1e-12));
  CHECK(r.prob(1) == 0.0);
  CHECK(r.prob(2) == Approx(0.4).margin(1e-12));
  CHECK(r.prob(3) == 0.0);
  const Distribution w = remove_token(p, 0);
  CHECK(w.prob(0) == 0.0);
  CHECK(w.prob(1) == Approx(0.6).margin(1e-12));
}

// residual() spreads a large q into a table by id (a scan per id was |p| · |q| steps: 16M for two
// full-vocabulary distributions under pure temperature sampling). The result must be what the
// scan gave: every id of p in its order, the same values bit for bit, for q in any order, with
// ids p lacks, ids q lacks and a repeated id (the first entry counts, as in prob()).
TEST_CASE("residual of full-vocabulary distributions equals the per-id scan", "[unit][acceptance]") {
  std::mt19937 g(11);
  for (const int n : {5, 33, 4096}) {
    for (const bool sparse : {false, true}) {
      Distribution p = random_dist(g, n, sparse), q = random_dist(g, n, sparse);
      std::shuffle(q.ids.begin(), q.ids.end(), g);  // ids and probs no longer pair as drawn: fine
      q.ids.push_back(q.ids.front());                // a repeat: ignored, as prob() ignores it
      q.probs.push_back(0.5);
      Distribution want;
      double sum = 0;
      for (size_t i = 0; i < p.ids.size(); ++i) {
        const double m = p.probs[i] - q.prob(p.ids[i]);
        if (m > 0) {
          want.ids.push_back(p.ids[i]);
          want.probs.push_back(m);
          sum += m;
        }
      }
      for (double& x : want.probs) x /= sum;
      const Distribution got = residual(p, q);
      INFO("n_vocab " << n << (sparse ? ", sparse" : ""));
      CHECK(got.ids == want.ids);
      CHECK(got.probs == want.probs);
    }
  }
}

// Draws a tree of the given shape from the synthetic draft q with the variant `mode`, and
// enumerates every draft outcome and every acceptance branch. Accumulates the distribution of
// the first two emitted tokens (after a rejection at the root, the second token comes from the
// next step, which samples the target given the first: lossless by induction).
TEST_CASE("tree acceptance is exactly lossless (enumerated)", "[unit][acceptance]") {
  // Shapes as parent lists (parents first): chain of 3, a fan of 3, and a depth-3 tree.
  const std::vector<std::vector<int32_t>> shapes = {
      {-1, 0, 1}, {-1, -1, -1}, {-1, -1, 0, 0, 2}, {-1, 0, -1, 2, 3}};
  const ChildSampling modes[] = {ChildSampling::deterministic, ChildSampling::with_replacement,
                                 ChildSampling::without_replacement};
  int checked = 0;
  for (int trial = 0; trial < 24; ++trial) {
    for (const auto& shape : shapes) {
      for (ChildSampling mode : modes) {
        const int V = 3 + trial % 3;  // vocabularies of 3..5 tokens (enumeration grows fast)
        const bool sparse = trial % 2 == 1;
        SyntheticModel target{V, sparse, 1000u + static_cast<uint32_t>(trial), {}};
        SyntheticModel draft{V, sparse, 5000u + static_cast<uint32_t>(trial), {}};
        const std::vector<int32_t> root_ctx = {0};
        std::map<std::pair<int, int>, double> joint;  // (first, second) -> probability
        double total = 0;
        // Enumerate the draft's choices and the rule's choices with one scripted chooser: the
        // drafting draws come first, then accept_tree's.
        enumerate([&](ScriptedChoices& c) {
          DraftTree t;
          std::vector<std::vector<int32_t>> node_ctx;
          for (size_t i = 0; i < shape.size(); ++i) {
            const int32_t parent = shape[i];
            const int slot = parent + 1;
            const std::vector<int32_t>& pctx = parent < 0 ? root_ctx : node_ctx[static_cast<size_t>(parent)];
            const Distribution& q = draft.at(pctx);
            // Siblings drawn so far under this parent (for without-replacement).
            Distribution qq = q;
            if (mode == ChildSampling::without_replacement) {
              for (int32_t s : t.children(slot)) qq = remove_token(qq, t.nodes[static_cast<size_t>(s)].token);
            }
            int32_t tok;
            if (mode == ChildSampling::deterministic) {
              // Deterministic: the k-th most likely token of q for the k-th child.
              const size_t k = t.children(slot).size();
              std::vector<size_t> order(q.ids.size());
              for (size_t j = 0; j < order.size(); ++j) order[j] = j;
              std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return q.probs[a] > q.probs[b]; });
              tok = q.ids[order[std::min(k, order.size() - 1)]];
            } else {
              tok = c.draw(qq);
            }
            t.set_children_source(slot, q, mode);
            t.add(tok, parent, 0.0);
            std::vector<int32_t> ctx = pctx;
            ctx.push_back(tok);
            node_ctx.push_back(ctx);
          }
          std::vector<Distribution> p;
          p.push_back(target.at(root_ctx));
          for (const auto& nc : node_ctx) p.push_back(target.at(nc));
          const TreeOutcome o = accept_tree(t, p, false, c);
          std::vector<int32_t> emitted;
          for (int32_t v : o.path) emitted.push_back(t.nodes[static_cast<size_t>(v)].token);
          emitted.push_back(o.next_token);
          if (emitted.size() >= 2) {
            joint[{emitted[0], emitted[1]}] += c.weight;
            total += c.weight;
          } else {
            // Second token from the next step: the target given the first (by induction).
            std::vector<int32_t> ctx = root_ctx;
            ctx.push_back(emitted[0]);
            const Distribution& p1 = target.at(ctx);
            for (size_t j = 0; j < p1.ids.size(); ++j) joint[{emitted[0], p1.ids[j]}] += c.weight * p1.probs[j];
            total += c.weight;
          }
        });
        REQUIRE(std::fabs(total - 1.0) <= 1e-9);
        const Distribution& p0 = target.at(root_ctx);
        for (int y = 0; y < V; ++y) {
          double first = 0;
          std::vector<int32_t> ctx = root_ctx;
          ctx.push_back(y);
          const Distribution& p1 = target.at(ctx);
          for (int z = 0; z < V; ++z) {
            const auto it = joint.find({y, z});
            const double got = it == joint.end() ? 0.0 : it->second;
            first += got;
            INFO("trial " << trial << " mode " << static_cast<int>(mode) << " tokens " << y << "," << z);
            CHECK(std::fabs(got - p0.prob(y) * p1.prob(z)) <= 1e-9);
          }
          CHECK(std::fabs(first - p0.prob(y)) <= 1e-9);
        }
        ++checked;
      }
    }
  }
  CHECK(checked == 24 * 4 * 3);
}

// accept_tree with the production RNG: the first emitted token follows p (chi-square at
// significance 0.001 with fixed seeds, so the outcome is deterministic).
TEST_CASE("accept_tree's first token follows p (Monte Carlo)", "[unit][acceptance]") {
  std::mt19937 g(99);
  const int V = 6;
  const Distribution p0 = random_dist(g, V, false), q0 = random_dist(g, V, false);
  const Distribution p1 = random_dist(g, V, false), q1 = random_dist(g, V, false);
  const Distribution p2 = random_dist(g, V, false);
  Rng rng(7);
  RngChoices ch(rng);
  std::map<int, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t> d = {q0.sample(rng), q1.sample(rng)};
    const DraftTree t = DraftTree::chain(d, {q0, q1}, ChildSampling::with_replacement);
    const std::vector<Distribution> p = {p0, p1, p2};
    const auto o = accept_tree(t, p, false, ch);
    counts[o.path.empty() ? o.next_token : d[0]]++;
  }
  std::map<int, double> expected;
  for (size_t i = 0; i < p0.ids.size(); ++i) expected[p0.ids[i]] = p0.probs[i];
  const auto cs = test::chi_square(counts, expected, n);
  INFO("chi2 " << cs.statistic << " dof " << cs.dof);
  CHECK(cs.p_value > 0.001);
}
