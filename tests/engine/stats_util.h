// Chi-square goodness-of-fit for the statistical losslessness tests.
#pragma once

#include <cmath>
#include <map>
#include <vector>

namespace specchat::test {

// Regularized upper incomplete gamma Q(a, x) (Numerical Recipes §6.2: series for x < a + 1,
// continued fraction otherwise).
inline double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double gln = std::lgamma(a);
  if (x < a + 1) {
    double sum = 1.0 / a, del = sum, ap = a;
    for (int n = 0; n < 1000; ++n) {
      ap += 1;
      del *= x / ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1.0 / 1e-300, d = 1.0 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

struct ChiSquare {
  double statistic = 0;
  int dof = 0;
  double p_value = 1;
};

// Observed counts vs expected probabilities over ids. Bins with expected count < 5 are pooled
// into one "other" bin (the usual validity rule).
inline ChiSquare chi_square(const std::map<int, int>& observed, const std::map<int, double>& expected_p,
                            int n) {
  double other_obs = 0, other_exp = 0;
  ChiSquare r;
  int bins = 0;
  std::map<int, int> obs = observed;
  for (const auto& [id, p] : expected_p) {
    const double e = p * n;
    const double o = obs.count(id) ? obs[id] : 0;
    obs.erase(id);
    if (e < 5) {
      other_obs += o;
      other_exp += e;
      continue;
    }
    r.statistic += (o - e) * (o - e) / e;
    ++bins;
  }
  for (const auto& [id, o] : obs) other_obs += o;  // ids with zero expected mass
  if (other_exp > 0 || other_obs > 0) {
    const double e = std::max(other_exp, 1e-9);
    r.statistic += (other_obs - e) * (other_obs - e) / e;
    ++bins;
  }
  r.dof = std::max(1, bins - 1);
  r.p_value = gamma_q(r.dof / 2.0, r.statistic / 2.0);
  return r;
}

}  // namespace specchat::test
