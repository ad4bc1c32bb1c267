#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace specchat {

double Distribution::prob(int32_t id) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return probs[i];
  }
  return 0.0;
}

int32_t Distribution::sample(Rng& rng) const {
  const double u = rng.uniform();
  double acc = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    acc += probs[i];
    if (u < acc) return ids[i];
  }
  // u landed in the rounding slack above the total: the last id with non-zero mass.
  for (size_t i = ids.size(); i-- > 0;) {
    if (probs[i] > 0) return ids[i];
  }
  return ids.empty() ? 0 : ids.back();
}

int32_t Distribution::argmax() const {
  size_t best = 0;
  for (size_t i = 1; i < ids.size(); ++i) {
    if (probs[i] > probs[best] || (probs[i] == probs[best] && ids[i] < ids[best])) best = i;
  }
  return ids.empty() ? 0 : ids[best];
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

Distribution process_logits(std::span<const float> logits, const SamplingParams& p) {
  Distribution d;
  if (p.greedy()) {
    d.ids = {argmax(logits)};
    d.probs = {1.0};
    return d;
  }
  const int n = static_cast<int>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  int keep = n;
  if (p.top_k > 0 && p.top_k < n) {
    keep = p.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  order.resize(static_cast<size_t>(keep));
  // Softmax over the kept ids at temperature T, in double for a stable sum.
  const double mx = logits[static_cast<size_t>(order[0])];
  std::vector<double> pr(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    pr[i] = std::exp((logits[static_cast<size_t>(order[i])] - mx) / p.temperature);
    sum += pr[i];
  }
  for (double& x : pr) x /= sum;
  size_t cut = pr.size();
  if (p.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < pr.size(); ++i) {
      acc += pr[i];
      if (acc >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += pr[i];
  d.ids.assign(order.begin(), order.begin() + static_cast<long>(cut));
  d.probs.resize(cut);
  for (size_t i = 0; i < cut; ++i) d.probs[i] = pr[i] / kept;
  return d;
}

}  // namespace specchat
