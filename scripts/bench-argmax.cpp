// Times the greedy per-row work of verification (kernels/cpu/sampling.h): cpu::argmax_row and
// cpu::all_finite against the scalar first-maximum scan they replaced, over 64 rows of 4096
// random logits (the bundled vocabulary), 2000 passes, three repetitions, µs per row.
// Build against a build tree (after `cmake --build build`), from the repository root:
//   g++ -O3 -std=c++20 -I. scripts/bench-argmax.cpp build/kernels/libspecchat_kernels.a
//       -lpthread -o /tmp/bench-argmax && /tmp/bench-argmax
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/sampling.h"

namespace {
int32_t scalar_argmax(const float* x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}
}  // namespace

int main() {
  constexpr int kVocab = 4096, kRows = 64, kPasses = 2000;
  std::mt19937 g(1);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> x(static_cast<size_t>(kVocab) * kRows);
  for (float& v : x) v = d(g);
  using Clock = std::chrono::steady_clock;
  const double n = static_cast<double>(kPasses) * kRows;
  for (int rep = 0; rep < 3; ++rep) {
    long check = 0;
    const auto t0 = Clock::now();
    for (int it = 0; it < kPasses; ++it)
      for (int r = 0; r < kRows; ++r) check += scalar_argmax(x.data() + r * kVocab, kVocab);
    const auto t1 = Clock::now();
    for (int it = 0; it < kPasses; ++it)
      for (int r = 0; r < kRows; ++r) check -= specchat::cpu::argmax_row(x.data() + r * kVocab, kVocab);
    const auto t2 = Clock::now();
    for (int it = 0; it < kPasses; ++it)
      for (int r = 0; r < kRows; ++r) check += specchat::cpu::all_finite(x.data() + r * kVocab, kVocab);
    const auto t3 = Clock::now();
    auto us = [&](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::micro>(b - a).count() / n;
    };
    std::printf("per %d-logit row: scalar argmax %.2f us, argmax_row %.2f us, all_finite %.2f us (check %ld)\n", kVocab,
                us(t0, t1), us(t1, t2), us(t2, t3), check);
  }
}
