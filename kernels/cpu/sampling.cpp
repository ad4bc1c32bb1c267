#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace specchat::cpu {

void argmax_rows(const float* x, int n_rows, int n, int32_t* ids) {
  for (int r = 0; r < n_rows; ++r) {
    const float* row = x + static_cast<int64_t>(r) * n;
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (row[i] > row[best]) best = i;
    }
    ids[r] = best;
  }
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
