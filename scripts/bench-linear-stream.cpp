// One-row cpu::linear products cycled over distinct q4_K matrices that together exceed the
// caches (160 MB), on a 2-thread pool: the weight GB/s a decode step's matmuls see, for one
// matrix shape (argv[1] = n_out; n_in 2048). Small matrices show the per-call costs (work split,
// prefetch ramp) that one large matrix hides.
// Build against a build tree (after `cmake --build build`), from the repository root:
//   g++ -O2 -std=c++20 -I. scripts/bench-linear-stream.cpp build/kernels/libspecchat_kernels.a
//       -lopenblas -lpthread -o /tmp/bench-linear-stream && /tmp/bench-linear-stream 512
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
using namespace specchat;
int main(int argc, char** argv) {
  if (argc < 2 || std::atoi(argv[1]) <= 0) {
    std::fprintf(stderr, "usage: bench-linear-stream n_out\n");
    return 2;
  }
  const int n_in = 2048, n_out = std::atoi(argv[1]);
  const size_t total = 160u << 20;
  const DType wt = DType::q4_k;
  const size_t rb = dtype_row_bytes(wt, n_in), mb = rb * n_out;
  const int nm = std::max<size_t>(1, total / mb);
  std::vector<uint8_t> w(mb * nm);
  std::mt19937 g(1); std::normal_distribution<float> nd(0, 1);
  std::vector<float> wf(n_in);
  for (int j = 0; j < 64; ++j) { for (float& v : wf) v = nd(g) * 0.05f; cpu::quantize_row(wt, wf.data(), w.data() + rb * j, n_in); }
  for (size_t j = 64; j < size_t(n_out) * nm; ++j) std::copy(w.begin() + rb * (j % 64), w.begin() + rb * (j % 64 + 1), w.begin() + rb * j);
  std::vector<float> x(n_in), y(n_out);
  for (float& v : x) v = nd(g);
  cpu::ThreadPool pool(2);
  std::vector<double> ts;
  for (int rep = 0; rep < 15; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int m = 0; m < nm; ++m) cpu::linear(x.data(), w.data() + mb * m, wt, y.data(), 1, n_in, n_out, &pool);
    ts.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ts.begin(), ts.end());
  std::printf("%d matrices of %d x %d (%.2f MB): %.1f us/call, %.1f GB/s median (best %.1f)\n", nm, n_out, n_in, mb / 1e6,
              ts[7] / nm, mb * nm / ts[7] / 1e3, mb * nm / ts[0] / 1e3);
}
