// RankPathModel (engine/speculative/rank_paths.h): values against a direct count over the
// sequences, best trees against brute force over every tree of observed paths, and the budget
// choice on correlated acceptance, where the independence model plans chains too short.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "engine/speculative/budget.h"
#include "engine/speculative/rank_paths.h"
#include "engine/speculative/sequoia.h"

using namespace specchat;

namespace {

using Seqs = std::vector<std::vector<int8_t>>;
using Path = std::vector<int>;

// Share of the starts with at least |path| ranks left whose next ranks begin with `path`
// (the model's value before the cap at the parent's value).
double direct_value(const Seqs& seqs, const Path& path) {
  int64_t hit = 0, n = 0;
  const int64_t d = static_cast<int64_t>(path.size());
  for (const auto& s : seqs) {
    const int64_t len = static_cast<int64_t>(s.size());
    for (int64_t u = 0; u + d <= len; ++u) {
      ++n;
      bool match = true;
      for (int64_t i = 0; i < d && match; ++i) match = s[static_cast<size_t>(u + i)] == path[static_cast<size_t>(i)];
      hit += match;
    }
  }
  return n > 0 ? static_cast<double>(hit) / static_cast<double>(n) : 0.0;
}

// Starts with at least |path| ranks left whose next ranks begin with `path`.
int64_t direct_count(const Seqs& seqs, const Path& path) {
  const double v = direct_value(seqs, path);
  int64_t n = 0;
  for (const auto& s : seqs) n += std::max<int64_t>(0, static_cast<int64_t>(s.size()) - static_cast<int64_t>(path.size()) + 1);
  return static_cast<int64_t>(std::llround(v * static_cast<double>(n)));
}

// The model's value of a path by its rules, from direct counts: 0 when a proper prefix was seen
// fewer than kMinPathCount times (the path is not followed past it), else its share capped at
// each prefix's.
double model_value(const Seqs& seqs, const Path& p) {
  double capped = 1.0;
  for (size_t d = 1; d <= p.size(); ++d) {
    const Path prefix(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(d));
    if (d < p.size() && direct_count(seqs, prefix) < kMinPathCount) return 0.0;
    capped = std::min(capped, direct_value(seqs, prefix));
  }
  return capped;
}

// The path of every node of a shape.
std::vector<Path> paths_of(const TreeShape& t) {
  std::vector<Path> out;
  for (int i = 0; i < t.size(); ++i) {
    const int32_t p = t.parent[static_cast<size_t>(i)];
    Path path = p < 0 ? Path{} : out[static_cast<size_t>(p)];
    path.push_back(t.rank[static_cast<size_t>(i)]);
    out.push_back(path);
  }
  return out;
}

Seqs random_seqs(uint32_t seed, int n_seq, int len, int R, double p0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Seqs out;
  for (int i = 0; i < n_seq; ++i) {
    std::vector<int8_t> s;
    for (int j = 0; j < len; ++j) {
      const double x = u(rng);
      s.push_back(static_cast<int8_t>(x < p0 ? 0 : 1 + static_cast<int>((x - p0) / (1 - p0) * R) % R));  // 1..R (R = miss)
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

TEST_CASE("RankPathModel values nodes by their share of start positions", "[unit]") {
  // ranks of two prompts; 2 = a miss (R = 2)
  const Seqs seqs = {{0, 0, 1, 0, 2, 0, 0, 0}, {1, 0, 0, 2, 0}};
  const RankPathModel m(seqs, 2, 4);
  CHECK(m.starts() == 13);
  for (const Path& p : {Path{0}, Path{1}, Path{0, 0}, Path{0, 1}, Path{1, 0}, Path{0, 0, 0}, Path{0, 0, 1},
                        Path{1, 0, 0}, Path{0, 0, 1, 0}}) {
    TreeShape t;
    for (size_t i = 0; i < p.size(); ++i) {
      t.parent.push_back(static_cast<int32_t>(i) - 1);
      t.rank.push_back(p[i]);
      t.depth.push_back(static_cast<int32_t>(i) + 1);
    }
    // The value of the deepest node is the difference of the chain and its parent chain.
    TreeShape parent_chain = t;
    parent_chain.parent.pop_back();
    parent_chain.rank.pop_back();
    parent_chain.depth.pop_back();
    INFO("path length " << p.size() << " first rank " << p[0]);
    const double v = m.expected_tokens(t) - m.expected_tokens(parent_chain);
    // The share, capped at the parent's value (here the end of the sequences raises (1, 0)
    // above its parent), and 0 below a prefix seen once ((0, 0, 1) is seen once: (0, 0, 1, 0)
    // is not followed).
    CHECK(v == Approx(model_value(seqs, p)));
  }
  CHECK(model_value(seqs, {0, 0, 1, 0}) == 0.0);  // below a prefix seen once
  CHECK(direct_value(seqs, {0, 0, 1, 0}) > 0.0);
  // A path never seen is worth nothing; nor is anything below it.
  TreeShape unseen;
  unseen.parent = {-1, 0};
  unseen.rank = {1, 1};
  unseen.depth = {1, 2};
  CHECK(m.expected_tokens(unseen) == Approx(1.0 + direct_value(seqs, {1})));
  // Chains: 1 + Σ_d P(the next d ranks are all 0).
  CHECK(m.chain(0).expected_tokens == 1.0);
  CHECK(m.chain(3).expected_tokens ==
        Approx(1.0 + direct_value(seqs, {0}) + direct_value(seqs, {0, 0}) + direct_value(seqs, {0, 0, 0})));
  CHECK(m.chain(3).is_chain());
  CHECK(m.chain(99).size() == 4);  // clamped to max_depth
}

TEST_CASE("RankPathModel::best_tree is the best tree of observed paths (brute force)", "[unit]") {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const int R = 3, D = 3;
    const Seqs seqs = random_seqs(seed, 6, 40, R, 0.55);
    const RankPathModel m(seqs, R, D);
    // Every observed path of depth ≤ D with its (capped) value, from the model itself.
    std::map<Path, double> value;
    std::function<void(Path)> walk = [&](Path p) {
      if (static_cast<int>(p.size()) == D) return;
      for (int r = 0; r < R; ++r) {
        Path q = p;
        q.push_back(r);
        const double v = model_value(seqs, q);
        if (v <= 0) continue;
        value[q] = v;
        walk(q);
      }
    };
    walk({});
    std::vector<Path> all;
    for (const auto& [p, v] : value) all.push_back(p);
    for (int n = 1; n <= 5; ++n) {
      for (int d = 1; d <= D; ++d) {
        // Brute force: every ancestor-closed set of at most n observed paths of depth ≤ d
        // (`all` is in lexicographic order, so a path's parent comes before it).
        double best = 1.0;
        std::vector<Path> pick;
        std::set<Path> in;
        std::function<void(size_t, double)> go = [&](size_t from, double sum) {
          best = std::max(best, sum);
          if (static_cast<int>(pick.size()) == n) return;
          for (size_t i = from; i < all.size(); ++i) {
            const Path& p = all[i];
            if (static_cast<int>(p.size()) > d) continue;
            const Path parent(p.begin(), p.end() - 1);
            if (!parent.empty() && !in.count(parent)) continue;
            pick.push_back(p);
            in.insert(p);
            go(i + 1, sum + value[p]);
            in.erase(p);
            pick.pop_back();
          }
        };
        go(0, 1.0);
        const TreeShape t = m.best_tree(n, d);
        INFO("seed " << seed << " n " << n << " d " << d);
        CHECK(t.size() <= n);
        CHECK(t.max_depth() <= d);
        CHECK(t.expected_tokens == Approx(best));
        CHECK(m.expected_tokens(t) == Approx(t.expected_tokens));
        // Parents first, and each prefix is itself the best tree of its size.
        for (int i = 0; i < t.size(); ++i) CHECK(t.parent[static_cast<size_t>(i)] < i);
        if (t.size() > 1) {
          TreeShape prefix = m.best_tree(t.size() - 1, d);
          CHECK(prefix.parent == std::vector<int32_t>(t.parent.begin(), t.parent.end() - 1));
          CHECK(prefix.rank == std::vector<int32_t>(t.rank.begin(), t.rank.end() - 1));
        }
        // The paths of the tree are observed paths of depth ≤ d.
        for (const Path& p : paths_of(t)) CHECK(value.count(p) == 1);
      }
    }
  }
}

TEST_CASE("RankPathModel caps a child's value at its parent's (end-of-sequence effect)", "[unit]") {
  const Seqs seqs = {{0, 0}, {1}};  // depth 1: 3 starts, 2 hits (2/3); depth 2: 1 start, 1 hit (1)
  const RankPathModel m(seqs, 2, 2);
  const TreeShape c = m.chain(2);
  CHECK(c.expected_tokens == Approx(1.0 + 2.0 / 3.0 + 2.0 / 3.0));
  const TreeShape t = m.best_tree(2, 2);
  REQUIRE(t.size() == 2);
  CHECK(t.parent == std::vector<int32_t>{-1, 0});  // the parent first
}

TEST_CASE("RankPathModel refuses malformed sequences and bounds its size", "[unit]") {
  const Seqs bad = {{0, 3}};
  CHECK_THROWS_AS(RankPathModel(bad, 2, 4), std::invalid_argument);
  const Seqs neg = {{0, -1}};
  CHECK_THROWS_AS(RankPathModel(neg, 2, 4), std::invalid_argument);
  const Seqs ok = {{0, 1, 2}};
  CHECK_THROWS_AS(RankPathModel(ok, 0, 4), std::invalid_argument);
  CHECK_THROWS_AS(RankPathModel(ok, 2, 0), std::invalid_argument);
  CHECK(try_rank_path_model(bad, 2, 4) == nullptr);
  CHECK(try_rank_path_model(Seqs{}, 2, 4) == nullptr);  // nothing recorded: no model
  CHECK(try_rank_path_model(Seqs{{}}, 2, 4) == nullptr);
  // Too few start positions to plan from (a calibration of one prompt and one token made
  // optimal trees of one node): the vector plans instead.
  CHECK(RankPathModel(ok, 2, 4).starts() == 3);
  CHECK(try_rank_path_model(ok, 2, 4) == nullptr);
  CHECK(try_rank_path_model(Seqs{std::vector<int8_t>(kMinRankPathStarts - 1, 0)}, 2, 4) == nullptr);
  CHECK(try_rank_path_model(Seqs{std::vector<int8_t>(kMinRankPathStarts, 0)}, 2, 4) != nullptr);
  // Random ranks over 31 values, each sequence twice (so every path is seen twice and followed):
  // past kRankPathMaxNodes distinct paths the model is refused instead of growing without bound.
  Seqs wide = random_seqs(7, 1, 60000, 32, 0.0);
  for (int8_t& r : wide[0]) r = static_cast<int8_t>(r % 32);  // no misses
  wide.push_back(wide[0]);
  CHECK_THROWS_AS(RankPathModel(wide, 32, 32), std::invalid_argument);
  CHECK(try_rank_path_model(wide, 32, 32) == nullptr);
  // Random paths seen once are not followed: the same ranks once make a small model.
  const Seqs once = {wide[0]};
  CHECK_NOTHROW(RankPathModel(once, 32, 32));
}

TEST_CASE("make_timings_monotone lowers a slow small size, never raises a fast one", "[unit]") {
  // One preempted one-row forward (5.18 ms) must not become every larger size's time, as a
  // running maximum made it (the break-it pass saw a whole table at 5.18 ms and auto planning
  // plain decoding).
  StepTimings t;
  t.draft_widths = {1, 2, 4};
  t.draft_ms = {0.03, 0.02, 0.05};
  t.verify_nodes = {0, 1, 2, 4};
  t.verify_ms = {0.39, 5.18, 0.40, 0.45};
  CHECK(make_timings_monotone(t) == Approx(5.18 / 0.40));
  CHECK(t.verify_ms == std::vector<double>{0.39, 0.40, 0.40, 0.45});
  CHECK(t.draft_ms == std::vector<double>{0.02, 0.02, 0.05});
  CHECK(make_timings_monotone(t) == 1.0);  // already non-decreasing: unchanged
  CHECK(t.verify_ms == std::vector<double>{0.39, 0.40, 0.40, 0.45});
}

TEST_CASE("choose_budget with rank paths plans the chains that correlated acceptance pays for", "[unit]") {
  // Bursty acceptance: stretches where the draft is right 12 times in a row, then 4 misses.
  // a[0] = 0.75 overall, so the independence model values a chain of k at Σ 0.75^d and stops
  // early; along the measured paths a long chain is accepted whole most of the time.
  Seqs seqs;
  for (int i = 0; i < 20; ++i) {
    std::vector<int8_t> s;
    for (int rep = 0; rep < 4; ++rep) {
      for (int j = 0; j < 12; ++j) s.push_back(0);
      for (int j = 0; j < 4; ++j) s.push_back(4);  // R = 4: misses
    }
    seqs.push_back(s);
  }
  const RankPathModel paths(seqs, 4, 16);
  const std::vector<double> a = {0.75, 0.0, 0.0, 0.0};
  const SequoiaPlanner planner(a, 16, 16);
  StepTimings t;  // a draft forward 0.1 ms; verification 1 ms + 0.1 ms per node
  t.draft_widths = {1, 16};
  t.draft_ms = {0.1, 0.1};
  t.verify_nodes = {0, 16};
  t.verify_ms = {1.0, 2.6};
  const BudgetChoice indep = choose_budget(planner, t, 16, 16);
  const BudgetChoice measured = choose_budget(planner, t, 16, 16, &paths);
  CHECK(indep.mode == TreeMode::chain);
  CHECK(measured.mode == TreeMode::chain);
  CHECK(measured.node_budget > indep.node_budget);
  CHECK(measured.expected_tokens == Approx(paths.chain(measured.node_budget).expected_tokens));
  // Checked against the step time the model says, the measured choice is the faster one.
  CHECK(measured.ms_per_token() < step_cost_ms(paths.chain(indep.node_budget), t, 1.0) /
                                      paths.chain(indep.node_budget).expected_tokens);
  // Depth is bounded by the model's.
  const RankPathModel shallow(seqs, 4, 3);
  CHECK(choose_budget(planner, t, 16, 16, &shallow).depth <= 3);
}

TEST_CASE("choose_budget with rank paths plans trees where second choices pay", "[unit]") {
  // The draft's first and second choices are each right half the time at the first position
  // (alternating), and rank 0 always after: a tree with both first-level ranks beats a chain.
  Seqs seqs;
  for (int i = 0; i < 10; ++i) {
    std::vector<int8_t> s;
    for (int rep = 0; rep < 10; ++rep) {
      s.push_back(static_cast<int8_t>(rep % 2));
      s.push_back(0);
      s.push_back(0);
      s.push_back(2);  // a miss
    }
    seqs.push_back(s);
  }
  const RankPathModel paths(seqs, 2, 8);
  const SequoiaPlanner planner(std::vector<double>{0.5, 0.2}, 8, 8);
  StepTimings t;
  t.draft_widths = {1, 8};
  t.draft_ms = {0.05, 0.05};
  t.verify_nodes = {0, 8};
  t.verify_ms = {1.0, 1.16};
  const BudgetChoice c = choose_budget(planner, t, 8, 8, &paths);
  REQUIRE(c.mode == TreeMode::optimal);
  bool has_rank1 = false;
  for (int32_t r : c.shape.rank) has_rank1 |= r == 1;
  CHECK(has_rank1);
  CHECK(c.expected_tokens == Approx(paths.expected_tokens(c.shape)));
}
