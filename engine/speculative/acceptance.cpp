#include "engine/speculative/acceptance.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace specchat {

double accept_probability(const Distribution& p, const Distribution& q, int32_t x) {
  const double px = p.prob(x), qx = q.prob(x);
  if (qx <= 0.0) return px > 0.0 ? 1.0 : 0.0;
  return std::min(1.0, px / qx);
}

Distribution residual(const Distribution& p, const Distribution& q) {
  // q's probability of each id of p: Distribution::prob scans q, so two full-vocabulary
  // distributions (pure temperature sampling: 4096 ids each for the bundled pair) took
  // |p| · |q| = 16M steps per rejection, slower than the forwards. A larger q is spread into a
  // table by id first (the first entry of an id wins, as in prob()).
  thread_local std::vector<double> by_id;
  bool table = q.ids.size() > 32;
  if (table) {
    int32_t top = -1;
    for (int32_t id : q.ids) top = std::max(top, id);
    table = top >= 0 && std::all_of(q.ids.begin(), q.ids.end(), [](int32_t id) { return id >= 0; });
    if (table) {
      by_id.assign(static_cast<size_t>(top) + 1, 0.0);
      for (size_t i = q.ids.size(); i-- > 0;) by_id[static_cast<size_t>(q.ids[i])] = q.probs[i];
    }
  }
  const auto q_prob = [&](int32_t id) {
    if (!table) return q.prob(id);
    return id >= 0 && static_cast<size_t>(id) < by_id.size() ? by_id[static_cast<size_t>(id)] : 0.0;
  };
  Distribution r;
  double sum = 0;
  for (size_t i = 0; i < p.ids.size(); ++i) {
    const double m = p.probs[i] - q_prob(p.ids[i]);
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

Distribution remove_token(const Distribution& d, int32_t x) {
  Distribution r;
  double sum = 0;
  for (size_t i = 0; i < d.ids.size(); ++i) {
    if (d.ids[i] == x || d.probs[i] <= 0) continue;
    r.ids.push_back(d.ids[i]);
    r.probs.push_back(d.probs[i]);
    sum += d.probs[i];
  }
  if (sum <= 0) return d;
  for (double& v : r.probs) v /= sum;
  return r;
}

TreeOutcome accept_tree(const DraftTree& tree, std::span<const Distribution> p, bool greedy,
                        Choices& choices) {
  if (p.size() != tree.nodes.size() + 1) throw std::invalid_argument("accept_tree: p size");
  TreeOutcome out;
  int slot = 0;  // 0 = root, i + 1 = node i
  for (;;) {
    const std::vector<int32_t> kids = tree.children(slot);
    const Distribution& p_here = p[static_cast<size_t>(slot)];
    if (greedy) {
      const int32_t t = p_here.argmax();
      const auto it = std::find_if(kids.begin(), kids.end(), [&](int32_t c) {
        return tree.nodes[static_cast<size_t>(c)].token == t;
      });
      if (it == kids.end()) {
        out.next_token = t;
        return out;
      }
      out.path.push_back(*it);
      slot = *it + 1;
      continue;
    }
    Distribution cur = p_here;
    int32_t accepted = -1;
    if (!kids.empty()) {
      Distribution q = tree.child_q[static_cast<size_t>(slot)];
      const ChildSampling mode = tree.child_mode[static_cast<size_t>(slot)];
      for (int32_t c : kids) {
        const int32_t x = tree.nodes[static_cast<size_t>(c)].token;
        if (mode == ChildSampling::deterministic) {
          // q is one-hot at x: accept with p(x); on rejection p loses x.
          if (choices.bernoulli(std::min(1.0, cur.prob(x)))) {
            accepted = c;
            break;
          }
          cur = remove_token(cur, x);
        } else {
          if (choices.bernoulli(accept_probability(cur, q, x))) {
            accepted = c;
            break;
          }
          cur = residual(cur, q);
          if (mode == ChildSampling::without_replacement) q = remove_token(q, x);
        }
      }
    }
    if (accepted < 0) {
      out.next_token = choices.draw(cur);
      return out;
    }
    out.path.push_back(accepted);
    slot = accepted + 1;
  }
}

}  // namespace specchat
