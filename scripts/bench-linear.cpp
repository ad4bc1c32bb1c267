// Times cpu::linear's variants (kernels/cpu/linear.h) on one thread: a weight matrix of
// n_out × n_in (argv[1] = n_in, argv[2] = n_out; default 320 × 1728, the bundled target's FFN
// gate/up) of type argv[3] (f16 default, or q8_0, q4_0, q4_K, q5_K, q6_K) with the activations
// argv[4] (q8 default: the integer path for block types; f32), batches of 1 … 32
// rows, best of 300 calls per variant and size, in µs, and the weight bytes read per µs (GB/s).
// Build against a build tree (after `cmake --build build`), from the repository root:
//   g++ -O2 -std=c++20 -I. scripts/bench-linear.cpp build/kernels/libspecchat_kernels.a
//       -lopenblas -lpthread -o /tmp/bench-linear && /tmp/bench-linear 864 320
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
#include <string>

using namespace specchat;

int main(int argc, char** argv) {
  const int n_in = argc > 1 ? std::atoi(argv[1]) : 320, n_out = argc > 2 ? std::atoi(argv[2]) : 1728;
  if (n_in <= 0 || n_out <= 0) {
    std::fprintf(stderr, "usage: bench-linear [n_in n_out]\n");
    return 2;
  }
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0, 1);
  std::vector<float> wf(static_cast<size_t>(n_in) * static_cast<size_t>(n_out));
  for (float& v : wf) v = nd(g) * 0.05f;
  const std::string tname = argc > 3 ? argv[3] : "f16";
  DType wt = DType::f16;
  for (DType t : {DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    if (tname == dtype_name(t)) wt = t;
  }
  const std::string aname = argc > 4 ? argv[4] : "q8";
  const cpu::Activations act = aname == "f32" ? cpu::Activations::f32 : cpu::Activations::q8;
  if (tname != dtype_name(wt) || (aname != "q8" && aname != "f32")) {
    std::fprintf(stderr, "unknown type %s or activations %s (q8 | f32)\n", tname.c_str(), aname.c_str());
    return 2;
  }
  const size_t wbytes = dtype_row_bytes(wt, static_cast<uint64_t>(n_in)) * static_cast<size_t>(n_out);
  std::vector<uint8_t> w(wbytes);
  if (wt == DType::f16) {
    cpu::convert_from_f32(wf.data(), w.data(), DType::f16, static_cast<int64_t>(wf.size()));
  } else {
    for (int j = 0; j < n_out; ++j) {
      cpu::quantize_row(wt, wf.data() + static_cast<size_t>(j) * n_in,
                        w.data() + dtype_row_bytes(wt, static_cast<uint64_t>(n_in)) * j, n_in);
    }
  }
  const std::pair<cpu::LinearIsa, const char*> isas[] = {
      {cpu::LinearIsa::generic, "generic"}, {cpu::LinearIsa::avx2, "avx2"}, {cpu::LinearIsa::avx512, "avx512"}};
  std::printf("%s %d x %d (%.1f MB), %s activations, one thread, best of 300 (us; GB/s of weights)\nrows",
              dtype_name(wt), n_out, n_in, static_cast<double>(wbytes) / 1e6, aname.c_str());
  for (const auto& [isa, name] : isas) {
    if (cpu::linear_isa_supported(isa)) std::printf(" %10s", name);
  }
  std::printf("\n");
  for (int rows : {1, 2, 4, 8, 16, 32}) {
    std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(n_in)), y(static_cast<size_t>(rows) * static_cast<size_t>(n_out));
    for (float& v : x) v = nd(g);
    std::printf("%4d", rows);
    for (const auto& [isa, name] : isas) {
      if (!cpu::linear_isa_supported(isa)) continue;
      double best = 1e30;
      for (int rep = 0; rep < 300; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        cpu::linear_with_isa(isa, x.data(), w.data(), wt, y.data(), rows, n_in, n_out, act);
        best = std::min(best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::printf(" %10.1f (%5.1f)", best, static_cast<double>(wbytes) / best / 1e3);
    }
    std::printf("\n");
  }
  return 0;
}
