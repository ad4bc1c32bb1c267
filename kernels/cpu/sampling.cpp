#include "kernels/cpu/sampling.h"

#include "kernels/cpu/vec_exp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace specchat::cpu {

namespace {
using v16f = float __attribute__((vector_size(64)));
using v16i = int32_t __attribute__((vector_size(64)));
using v8d = double __attribute__((vector_size(64)));

// The largest of x [n] (-inf when n == 0), over 16 lanes that start at -inf and take
// `x > lane ? x : lane` (exact, order-free, skips NaN). Always inlined, so each target_clones
// variant that calls it vectorises it for its own ISA.
__attribute__((always_inline)) inline float max_skipping_nan(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  v16f lane = v16f{} + ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v16f v;
    __builtin_memcpy(&v, x + i, sizeof v);
    lane = v > lane ? v : lane;
  }
  float m = ninf;
  for (int j = 0; j < 16; ++j) m = lane[j] > m ? lane[j] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace

// Pass 1: max_skipping_nan.
// Pass 2: the first 16-block with an element equal to the maximum, then the index in it. With
// x[0] not NaN the maximum is x[0] or larger and present; every value -inf or NaN gives the
// first -inf, as the scan does.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
int32_t argmax_row(const float* x, int64_t n) {
  if (n <= 0 || std::isnan(x[0])) return 0;
  const float m = max_skipping_nan(x, n);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    v16f v;
    __builtin_memcpy(&v, x + k, sizeof v);
    const v16i eq = v == m;
    v16i acc = eq;
    int any = 0;
    for (int j = 0; j < 16; ++j) any |= acc[j];
    if (any) break;
  }
  for (; k < n; ++k) {
    if (x[k] == m) return static_cast<int32_t>(k);
  }
  return 0;  // unreachable (see above)
}

// v − v is +0 for finite v and NaN for ±inf and NaN; a NaN survives the sums.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
bool all_finite(const float* x, int64_t n) {
  v16f acc{};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    v16f v;
    __builtin_memcpy(&v, x + i, sizeof v);
    acc += v - v;
  }
  float s = 0;
  for (int j = 0; j < 16; ++j) s += acc[j];
  for (; i < n; ++i) s += x[i] - x[i];
  return !std::isnan(s);
}

// Sums 16 lanes of e^{x − m} at a time into two 8-lane double accumulators; the tail goes
// through a copy padded with −inf (e^-87 per padded lane: nothing against a sum of at least 1).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
double logsumexp_row(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const float m = max_skipping_nan(x, n);
  if (!(m > ninf)) return static_cast<double>(m);  // n == 0 or every x[i] is -inf
  v8d lo{}, hi{};
  auto add16 = [&](const v16f& v) {
    v16f e;
    SPECCHAT_EXP16(v - m, e);
    lo += __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7), v8d);
    hi += __builtin_convertvector(__builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15), v8d);
  };
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    v16f v;
    __builtin_memcpy(&v, x + k, sizeof v);
    add16(v);
  }
  if (k < n) {
    v16f v = v16f{} + ninf;
    for (int64_t j = k; j < n; ++j) v[j - k] = x[j];
    add16(v);
  }
  const v8d s = lo + hi;
  double sum = 0;
  for (int j = 0; j < 8; ++j) sum += s[j];
  return static_cast<double>(m) + std::log(sum);
}

void argmax_rows(const float* x, int n_rows, int n, int32_t* ids) {
  for (int r = 0; r < n_rows; ++r) ids[r] = argmax_row(x + static_cast<int64_t>(r) * n, n);
}

void topk_rows(const float* x, int n_rows, int n, int k, int32_t* ids, float* vals) {
  if (k < 1 || k > n) throw std::invalid_argument("topk_rows: k must be in [1, n]");
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int r = 0; r < n_rows; ++r) {
    const float* row = x + static_cast<int64_t>(r) * n;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int i = 0; i < k; ++i) {
      ids[static_cast<int64_t>(r) * k + i] = order[static_cast<size_t>(i)];
      vals[static_cast<int64_t>(r) * k + i] = row[order[static_cast<size_t>(i)]];
    }
  }
}

void topp_rows(float* probs, int n_rows, int n, float top_p, int32_t* n_kept) {
  for (int r = 0; r < n_rows; ++r) {
    float* row = probs + static_cast<int64_t>(r) * n;
    int cut = n;
    if (top_p < 1.0f) {
      double acc = 0;
      for (int i = 0; i < n; ++i) {
        acc += row[i];
        if (acc >= top_p) {
          cut = i + 1;
          break;
        }
      }
    }
    double kept = 0;
    for (int i = 0; i < cut; ++i) kept += row[i];
    for (int i = 0; i < n; ++i) row[i] = i < cut ? static_cast<float>(row[i] / kept) : 0.0f;
    if (n_kept != nullptr) n_kept[r] = cut;
  }
}

}  // namespace specchat::cpu
