// A STREAM-like probe of this machine's memory READ bandwidth (the bound of CPU decode: every
// weight byte is read once per token). Two threads (or argv[1]) sum disjoint halves of a 1 GiB
// buffer of floats, 5 times; prints the best GB/s. Built and run by scripts/bench-runtime.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int n_threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const size_t n = (size_t{1} << 30) / sizeof(float);
  std::vector<float> a(n, 1.0f);
  std::vector<double> sums(static_cast<size_t>(n_threads));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < n_threads; ++t) {
      ts.emplace_back([&, t] {
        const size_t b = n * static_cast<size_t>(t) / static_cast<size_t>(n_threads);
        const size_t e = n * static_cast<size_t>(t + 1) / static_cast<size_t>(n_threads);
        float acc[16] = {};
        for (size_t i = b; i + 16 <= e; i += 16) {
          for (int l = 0; l < 16; ++l) acc[l] += a[i + static_cast<size_t>(l)];
        }
        double s = 0;
        for (float v : acc) s += v;
        sums[static_cast<size_t>(t)] = s;
      });
    }
    for (auto& th : ts) th.join();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(n * sizeof(float)) / sec / 1e9);
  }
  double total = 0;
  for (double s : sums) total += s;
  std::printf("read bandwidth %.1f GB/s (%d threads, 1 GiB, best of 5; checksum %.0f)\n", best, n_threads, total);
  return 0;
}
