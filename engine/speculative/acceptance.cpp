#include "engine/speculative/acceptance.h"

#include <algorithm>
#include <stdexcept>

namespace specchat {

double accept_probability(const Distribution& p, const Distribution& q, int32_t x) {
  const double px = p.prob(x), qx = q.prob(x);
  if (qx <= 0.0) return px > 0.0 ? 1.0 : 0.0;
  return std::min(1.0, px / qx);
}

Distribution residual(const Distribution& p, const Distribution& q) {
  Distribution r;
  double sum = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double m = p.probs[i] - q.prob(p.ids[i]);
    if (m > 0) {
      r.ids.push_back(p.ids[i]);
      r.probs.push_back(m);
      sum += m;
    }
  }
  if (sum <= 0) return p;
  for (double& x : r.probs) x /= sum;
  return r;
}

ChainOutcome accept_chain(std::span<const int32_t> draft, std::span<const Distribution> q,
                          std::span<const Distribution> p, bool greedy, Rng& rng) {
  const size_t k = draft.size();
  if (q.size() != k || p.size() != k + 1) throw std::invalid_argument("accept_chain: sizes");
  ChainOutcome out;
  for (size_t i = 0; i < k; ++i) {
    if (greedy) {
      const int32_t t = p[i].argmax();
      if (draft[i] != t) {
        out.next_token = t;
        return out;
      }
    } else if (rng.uniform() >= accept_probability(p[i], q[i], draft[i])) {
      out.next_token = residual(p[i], q[i]).sample(rng);
      return out;
    }
    ++out.n_accepted;
  }
  out.next_token = greedy ? p[k].argmax() : p[k].sample(rng);
  return out;
}

}  // namespace specchat
