#include "engine/speculative/budget.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace specchat {

namespace {

bool table_ok(const std::vector<int>& keys, const std::vector<double>& ms, int min_key) {
  if (keys.empty() || keys.size() != ms.size()) return false;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] < min_key || (i > 0 && keys[i] <= keys[i - 1])) return false;
    if (!std::isfinite(ms[i]) || ms[i] < 0) return false;
  }
  return true;
}

double interpolate(const std::vector<int>& keys, const std::vector<double>& ms, double x) {
  if (keys.size() == 1) return ms[0];
  size_t hi = 1;
  while (hi + 1 < keys.size() && x > keys[hi]) ++hi;
  const double x0 = keys[hi - 1], x1 = keys[hi];
  const double y = ms[hi - 1] + (ms[hi] - ms[hi - 1]) * (x - x0) / (x1 - x0);
  return std::max(0.0, y);
}

}  // namespace

bool StepTimings::valid() const {
  return table_ok(draft_widths, draft_ms, 1) && table_ok(verify_nodes, verify_ms, 0);
}

double StepTimings::t_draft(double width) const { return interpolate(draft_widths, draft_ms, width); }
double StepTimings::t_verify(int nodes) const { return interpolate(verify_nodes, verify_ms, nodes); }

double make_timings_monotone(StepTimings& t) {
  double worst = 1.0;
  for (std::vector<double>* ms : {&t.draft_ms, &t.verify_ms}) {
    double least = std::numeric_limits<double>::infinity();
    for (auto it = ms->rbegin(); it != ms->rend(); ++it) {
      if (*it > least) {
        if (least > 0) worst = std::max(worst, *it / least);
        *it = least;
      }
      least = std::min(least, *it);
    }
  }
  return worst;
}

double step_cost_ms(const TreeShape& shape, const StepTimings& t, double fed_first) {
  double ms = t.t_verify(shape.size());
  if (shape.size() == 0) return ms;
  // Parents per level: nodes of depth d − 1 with at least one child feed level d.
  const int D = shape.max_depth();
  std::vector<int> has_kids(static_cast<size_t>(shape.size()), 0), feeding(static_cast<size_t>(D) + 1, 0);
  for (int i = 0; i < shape.size(); ++i) {
    const int32_t p = shape.parent[static_cast<size_t>(i)];
    if (p >= 0 && !has_kids[static_cast<size_t>(p)]) {
      has_kids[static_cast<size_t>(p)] = 1;
      feeding[static_cast<size_t>(shape.depth[static_cast<size_t>(p)])]++;
    }
  }
  ms += t.t_draft(std::max(1.0, fed_first));
  for (int d = 2; d <= D; ++d) ms += t.t_draft(std::max(1, feeding[static_cast<size_t>(d - 1)]));
  return ms;
}

BudgetChoice choose_budget(const SequoiaPlanner& planner, const StepTimings& t, int max_nodes, int max_depth,
                           const RankPathModel* paths) {
  if (!t.valid()) throw std::invalid_argument("choose_budget: timings are missing or malformed");
  const int N = std::clamp(max_nodes, 0, planner.max_nodes());
  int Dmax = std::clamp(max_depth, 0, planner.max_depth());
  if (paths) Dmax = std::min(Dmax, paths->max_depth());
  BudgetChoice best;
  best.step_ms = t.t_verify(0);  // plain decoding: one target forward per token
  auto consider = [&](BudgetChoice c) {
    if (c.ms_per_token() < best.ms_per_token() * (1 - 1e-9)) best = std::move(c);
  };
  const double a0 = planner.accept_by_rank().empty() ? 0.0 : planner.accept_by_rank()[0];
  for (int k = 1; k <= std::min(N, Dmax); ++k) {
    BudgetChoice c;
    c.mode = TreeMode::chain;
    c.node_budget = c.depth = k;
    if (paths) {
      c.shape = paths->chain(k);
    } else {
      double p = 1.0;
      for (int i = 0; i < k; ++i) {
        p *= a0;
        c.shape.parent.push_back(i - 1);
        c.shape.rank.push_back(0);
        c.shape.depth.push_back(i + 1);
        c.shape.expected_tokens += p;
      }
    }
    c.expected_tokens = c.shape.expected_tokens;
    c.step_ms = step_cost_ms(c.shape, t, 1.0);
    consider(std::move(c));
  }
  if (paths) {
    // best_tree(n, d) is the first n nodes of best_tree(N, d): one tree per depth.
    for (int d = 1; d <= std::min(N, Dmax); ++d) {
      const TreeShape full = paths->best_tree(N, d);
      TreeShape s;
      for (int n = 1; n <= full.size(); ++n) {
        const size_t i = static_cast<size_t>(n - 1);
        s.parent.push_back(full.parent[i]);
        s.rank.push_back(full.rank[i]);
        s.depth.push_back(full.depth[i]);
        if (n < d || s.max_depth() != d || s.is_chain()) continue;
        BudgetChoice c;
        c.mode = TreeMode::optimal;
        c.node_budget = n;
        c.depth = d;
        c.shape = s;
        c.shape.expected_tokens = c.expected_tokens = paths->expected_tokens(s);
        c.step_ms = step_cost_ms(c.shape, t, std::round(c.expected_tokens));
        consider(std::move(c));
      }
    }
    return best;
  }
  for (int n = 1; n <= N; ++n) {
    for (int d = 1; d <= std::min(n, Dmax); ++d) {
      TreeShape s = planner.tree(n, d);
      // Smaller trees (the DP stopped gaining) and chains were already considered.
      if (s.size() != n || s.max_depth() != d || s.is_chain()) continue;
      BudgetChoice c;
      c.mode = TreeMode::optimal;
      c.node_budget = n;
      c.depth = d;
      c.expected_tokens = s.expected_tokens;
      c.step_ms = step_cost_ms(s, t, std::round(s.expected_tokens));
      c.shape = std::move(s);
      consider(std::move(c));
    }
  }
  return best;
}

}  // namespace specchat
