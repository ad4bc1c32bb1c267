// A STREAM-like probe of this machine's memory READ bandwidth (the bound of CPU decode: every
// weight byte is read once per token). Two threads (or argv[1]) sum disjoint parts of a 1 GiB
// buffer of floats, 5 times, each with 8 independent accumulators (so the adds' latency does not
// bound the rate), once plainly and once with software prefetch 16 KiB ahead (as the integer
// matmul kernels do); prints the best GB/s (bytes / slowest thread's time, thread start-up not
// counted). Built and run by scripts/bench-runtime and scripts/bench-quant.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

// Sums a[b, e) (e − b a multiple of 128) with 8 × 16 accumulators.
template <bool Prefetch>
double sum_range(const float* a, size_t b, size_t e) {
  float acc[8][16] = {};
  for (size_t i = b; i + 128 <= e; i += 128) {
    if (Prefetch) {
      for (int c = 0; c < 8; ++c) _mm_prefetch(reinterpret_cast<const char*>(a + i + 4096 + 16 * c), _MM_HINT_T0);
    }
    for (int k = 0; k < 8; ++k) {
      for (int l = 0; l < 16; ++l) acc[k][l] += a[i + 16 * static_cast<size_t>(k) + static_cast<size_t>(l)];
    }
  }
  double s = 0;
  for (auto& row : acc) {
    for (float v : row) s += v;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int n_threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  std::vector<double> sums(static_cast<size_t>(n_threads));
  double best[2] = {0, 0};
  for (int rep = 0; rep < 5; ++rep) {
    for (int pf = 0; pf < 2; ++pf) {
      std::atomic<int> ready{0};
      std::vector<double> secs(static_cast<size_t>(n_threads));
      std::vector<std::thread> ts;
      for (int t = 0; t < n_threads; ++t) {
        ts.emplace_back([&, t] {
          const size_t b = n * static_cast<size_t>(t) / static_cast<size_t>(n_threads) / 128 * 128;
          const size_t e = n * static_cast<size_t>(t + 1) / static_cast<size_t>(n_threads) / 128 * 128;
          ready.fetch_add(1);
          while (ready.load() < n_threads) {
          }
          const auto t0 = std::chrono::steady_clock::now();
          sums[static_cast<size_t>(t)] += pf ? sum_range<true>(a.data(), b, e) : sum_range<false>(a.data(), b, e);
          secs[static_cast<size_t>(t)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
      }
      for (auto& th : ts) th.join();
      const double sec = *std::max_element(secs.begin(), secs.end());
      best[pf] = std::max(best[pf], static_cast<double>(n * sizeof(float)) / sec / 1e9);
    }
  }
  double total = 0;
  for (double s : sums) total += s;
  std::printf("read bandwidth %.1f GB/s (%d threads, 1 GiB, best of 5; plain %.1f, prefetch %.1f; checksum %.0f)\n",
              std::max(best[0], best[1]), n_threads, best[0], best[1], total);
  return 0;
}
