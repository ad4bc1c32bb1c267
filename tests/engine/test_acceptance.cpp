// The acceptance rule on synthetic distributions: crafted greedy cases, exact enumeration of
// the sampling rule, and a Monte Carlo run of accept_chain itself.
#include <catch2/catch.hpp>

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
    if (sparse && u(g) < 0.3) w = 0;  // top-k / top-p style holes
    if (w > 0) {
      d.ids.push_back(i);
      d.probs.push_back(w);
      sum += w;
    }
  }
  if (d.ids.empty()) return one_hot(0);
  for (double& p : d.probs) p /= sum;
  return d;
}

}  // namespace

TEST_CASE("greedy acceptance: crafted cases", "[unit][acceptance]") {
  Rng rng(1);
  const std::vector<Distribution> q = {one_hot(5), one_hot(6), one_hot(7)};
  SECTION("perfect match accepts all and adds the bonus") {
    const std::vector<Distribution> p = {one_hot(5), one_hot(6), one_hot(7), one_hot(9)};
    const std::vector<int32_t> d = {5, 6, 7};
    const auto o = accept_chain(d, q, p, true, rng);
    CHECK(o.n_accepted == 3);
    CHECK(o.next_token == 9);
  }
  SECTION("early mismatch emits the target's token") {
    const std::vector<Distribution> p = {one_hot(5), one_hot(2), one_hot(7), one_hot(9)};
    const std::vector<int32_t> d = {5, 6, 7};
    const auto o = accept_chain(d, q, p, true, rng);
    CHECK(o.n_accepted == 1);
    CHECK(o.next_token == 2);
  }
  SECTION("all rejected") {
    const std::vector<Distribution> p = {one_hot(1), one_hot(6), one_hot(7), one_hot(9)};
    const std::vector<int32_t> d = {5, 6, 7};
    const auto o = accept_chain(d, q, p, true, rng);
    CHECK(o.n_accepted == 0);
    CHECK(o.next_token == 1);
  }
  SECTION("empty draft is a plain decode step") {
    const std::vector<Distribution> p = {one_hot(3)};
    const auto o = accept_chain({}, {}, p, true, rng);
    CHECK(o.n_accepted == 0);
    CHECK(o.next_token == 3);
  }
}

TEST_CASE("residual is norm(max(0, p - q))", "[unit][acceptance]") {
  const Distribution p{{0, 1, 2}, {0.5, 0.3, 0.2}};
  const Distribution q{{0, 1, 3}, {0.2, 0.6, 0.2}};
  const Distribution r = residual(p, q);
  // p - q = {0.3, -0.3, 0.2, -0.2} -> {0.3, 0, 0.2} / 0.5
  CHECK(r.prob(0) == Approx(0.6).margin(1e-12));
  CHECK(r.prob(1) == 0.0);
  CHECK(r.prob(2) == Approx(0.4).margin(1e-12));
  CHECK(r.prob(3) == 0.0);
}

// Exact enumeration over a depth-2 chain: the draft draws x1 ~ q0, x2 ~ q1(.|x1); the target has
// p0 and p1(.|x1). Using the rule's own primitives (accept_probability, residual), the first
// emitted token must follow p0 and the first two p0(x1) p1(x2|x1), to 1e-9.
TEST_CASE("sampling acceptance is exactly lossless (enumerated)", "[unit][acceptance]") {
  std::mt19937 g(1234);
  for (int trial = 0; trial < 200; ++trial) {
    const int V = 2 + trial % 7;  // vocabularies of 2..8 tokens
    const bool sparse = trial % 2 == 1;
    const Distribution p0 = random_dist(g, V, sparse), q0 = random_dist(g, V, sparse);
    std::vector<Distribution> p1, q1;
    for (int x = 0; x < V; ++x) {
      p1.push_back(random_dist(g, V, sparse));
      q1.push_back(random_dist(g, V, sparse));
    }
    std::vector<double> first(static_cast<size_t>(V), 0.0);
    std::vector<double> joint(static_cast<size_t>(V * V), 0.0);
    const Distribution r0 = residual(p0, q0);
    for (size_t i = 0; i < q0.ids.size(); ++i) {
      const int x1 = q0.ids[i];
      const double w1 = q0.probs[i];
      const double a1 = accept_probability(p0, q0, x1);
      // Rejected at 1: y ~ r0, then the next step samples from the target given y (lossless
      // by induction): joint(y, z) += w1 (1 - a1) r0(y) p1(z|y).
      for (size_t j = 0; j < r0.ids.size(); ++j) {
        const int y = r0.ids[j];
        first[static_cast<size_t>(y)] += w1 * (1 - a1) * r0.probs[j];
        for (size_t m = 0; m < p1[static_cast<size_t>(y)].ids.size(); ++m) {
          joint[static_cast<size_t>(y * V + p1[static_cast<size_t>(y)].ids[m])] +=
              w1 * (1 - a1) * r0.probs[j] * p1[static_cast<size_t>(y)].probs[m];
        }
      }
      first[static_cast<size_t>(x1)] += w1 * a1;
      const Distribution& pq = p1[static_cast<size_t>(x1)];
      const Distribution& qq = q1[static_cast<size_t>(x1)];
      const Distribution r1 = residual(pq, qq);
      for (size_t k = 0; k < qq.ids.size(); ++k) {
        const int x2 = qq.ids[k];
        const double a2 = accept_probability(pq, qq, x2);
        joint[static_cast<size_t>(x1 * V + x2)] += w1 * a1 * qq.probs[k] * a2;
        for (size_t m = 0; m < r1.ids.size(); ++m) {
          joint[static_cast<size_t>(x1 * V + r1.ids[m])] += w1 * a1 * qq.probs[k] * (1 - a2) * r1.probs[m];
        }
      }
    }
    for (int y = 0; y < V; ++y) {
      INFO("trial " << trial << " token " << y);
      CHECK(std::fabs(first[static_cast<size_t>(y)] - p0.prob(y)) <= 1e-9);
      for (int z = 0; z < V; ++z) {
        CHECK(std::fabs(joint[static_cast<size_t>(y * V + z)] - p0.prob(y) * p1[static_cast<size_t>(y)].prob(z)) <= 1e-9);
      }
    }
  }
}

// accept_chain itself, sampled: the first emitted token follows p0 (chi-square, p > 0.001 with
// fixed seeds, so the outcome is deterministic).
TEST_CASE("accept_chain's first token follows p (Monte Carlo)", "[unit][acceptance]") {
  std::mt19937 g(99);
  const int V = 6;
  const Distribution p0 = random_dist(g, V, false), q0 = random_dist(g, V, false);
  const Distribution p1 = random_dist(g, V, false), q1 = random_dist(g, V, false);
  const Distribution p2 = random_dist(g, V, false);
  Rng rng(7);
  std::map<int, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    const int32_t x1 = q0.sample(rng), x2 = q1.sample(rng);
    const std::vector<int32_t> d = {x1, x2};
    const std::vector<Distribution> q = {q0, q1}, p = {p0, p1, p2};
    const auto o = accept_chain(d, q, p, false, rng);
    counts[o.n_accepted > 0 ? x1 : o.next_token]++;
  }
  std::map<int, double> expected;
  for (size_t i = 0; i < p0.ids.size(); ++i) expected[p0.ids[i]] = p0.probs[i];
  const auto cs = test::chi_square(counts, expected, n);
  INFO("chi2 " << cs.statistic << " dof " << cs.dof);
  CHECK(cs.p_value > 0.001);
}
