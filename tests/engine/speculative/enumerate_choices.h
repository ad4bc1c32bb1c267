// Exact enumeration of randomised drafting + acceptance (as tests/engine/test_acceptance.cpp
// does for accept_tree alone): a Choices that replays scripted decisions depth-first and
// weights each complete run by its probability, and synthetic small-vocabulary distributions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "engine/speculative/acceptance.h"

namespace specchat::test {

inline Distribution one_hot(int32_t id) { return Distribution{{id}, {1.0}}; }

// A random distribution over [0, n_vocab); `sparse` leaves about a third of the ids at 0 (as
// top-k / top-p do). Ids in descending probability (process_logits' order).
inline Distribution random_dist(std::mt19937& g, int n_vocab, bool sparse) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::pair<double, int32_t>> w;
  double sum = 0;
  for (int i = 0; i < n_vocab; ++i) {
    double x = u(g);
    if (sparse && u(g) < 0.35) x = 0;
    if (x > 0) {
      w.emplace_back(x, i);
      sum += x;
    }
  }
  if (w.empty()) return one_hot(static_cast<int32_t>(g() % static_cast<unsigned>(n_vocab)));
  std::stable_sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  Distribution d;
  for (const auto& [x, id] : w) {
    d.ids.push_back(id);
    d.probs.push_back(x / sum);
  }
  return d;
}

// Replays decisions from a script, extending it as new decisions appear; advance() moves to the
// next sequence of decisions (depth-first). weight = the probability of the current run.
class ScriptedChoices : public Choices {
 public:
  std::vector<int> script, arity;
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

// Calls f once per complete sequence of decisions.
inline void enumerate(const std::function<void(ScriptedChoices&)>& f) {
  ScriptedChoices c;
  do {
    c.restart();
    f(c);
  } while (c.advance());
}

// A synthetic target: a fixed random distribution for every context (memoised).
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

}  // namespace specchat::test
