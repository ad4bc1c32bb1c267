// cpu::linear (the small-batch matmul with weights in their file type) against its scalar twin
// cpu::linear_ref, and its batch invariance, which the multi-sequence identity tests rely on.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear.h"

using namespace specchat;

namespace {

struct Weights {
  std::vector<float> f32;
  std::vector<uint16_t> w16;
  const void* data(DType t) const { return t == DType::f32 ? static_cast<const void*>(f32.data()) : w16.data(); }
};

// W [n_out, n_in] uniform in ±1/sqrt(n_in) stored in `t` (16-bit types rounded), x uniform ±1.
Weights make_weights(DType t, int n_out, int n_in, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const float a = 1.0f / std::sqrt(static_cast<float>(n_in));
  Weights w;
  w.f32.resize(static_cast<size_t>(n_out) * n_in);
  for (float& v : w.f32) v = a * u(g);
  if (t != DType::f32) {
    w.w16.resize(w.f32.size());
    cpu::convert_from_f32(w.f32.data(), w.w16.data(), t, static_cast<int64_t>(w.f32.size()));
  }
  return w;
}

std::vector<float> make_x(int n, int n_in, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n) * n_in);
  for (float& v : x) v = u(g);
  return x;
}

}  // namespace

TEST_CASE("cpu::linear matches its scalar twin for n = 1..64 rows, F32/F16/BF16, odd sizes", "[unit][kernels][linear]") {
  INFO("dispatch: " << cpu::linear_isa());
  // Shapes whose n_in and n_out are not multiples of 8, 32 or the 256-column block.
  const std::vector<std::pair<int, int>> shapes = {{37, 11}, {300, 45}, {513, 130}, {1000, 7}};
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    for (const auto& [n_in, n_out] : shapes) {
      const Weights w = make_weights(t, n_out, n_in, 7u + static_cast<uint32_t>(n_in));
      for (int n : {1, 2, 3, 5, 8, 17, 32, 33, 64}) {
        const std::vector<float> x = make_x(n, n_in, 11u + static_cast<uint32_t>(n));
        std::vector<float> got(static_cast<size_t>(n) * n_out), want(got.size());
        cpu::linear(x.data(), w.data(t), t, got.data(), n, n_in, n_out);
        cpu::linear_ref(x.data(), w.data(t), t, want.data(), n, n_in, n_out);
        // Products are exact in both (weights widened exactly); the f32 sums of the kernel
        // differ from the twin's double sums by at most ~n_in · 2^-24 relative to Σ|x·w|,
        // which is <= sqrt(n_in) here: 1e-5 absolute covers n_in = 1000 with a margin of 3.
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
        INFO(dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " rows " << n << " max abs err " << worst);
        CHECK(worst <= 1e-5);
      }
    }
  }
}

TEST_CASE("cpu::linear is batch-invariant: a row's result does not depend on the other rows", "[unit][kernels][linear]") {
  const int n_in = 777, n_out = 93, n = 13;
  for (DType t : {DType::f16, DType::bf16}) {
    const Weights w = make_weights(t, n_out, n_in, 5);
    const std::vector<float> x = make_x(n, n_in, 6);
    std::vector<float> all(static_cast<size_t>(n) * n_out);
    cpu::linear(x.data(), w.data(t), t, all.data(), n, n_in, n_out);
    for (int r = 0; r < n; ++r) {
      std::vector<float> one(static_cast<size_t>(n_out));
      cpu::linear(x.data() + static_cast<size_t>(r) * n_in, w.data(t), t, one.data(), 1, n_in, n_out);
      INFO(dtype_name(t) << " row " << r);
      // Bitwise: the identity tests compare tokens, so near-ties must break the same way.
      CHECK(std::equal(one.begin(), one.end(), all.begin() + static_cast<long>(r) * n_out));
    }
    // Rows two, three and four at a time (up to four rows the weights are widened in registers,
    // not through the tile).
    for (int m : {2, 3, 4}) {
      for (int r = 0; r + m <= n; r += m) {
        std::vector<float> some(static_cast<size_t>(m) * n_out);
        cpu::linear(x.data() + static_cast<size_t>(r) * n_in, w.data(t), t, some.data(), m, n_in, n_out);
        INFO(dtype_name(t) << " " << m << " rows from " << r);
        CHECK(std::equal(some.begin(), some.end(), all.begin() + static_cast<long>(r) * n_out));
      }
    }
    // The same row at another place in another batch.
    std::vector<float> x2 = make_x(4, n_in, 99);
    std::copy_n(x.data() + 5 * n_in, n_in, x2.data() + 3 * n_in);
    std::vector<float> y2(4 * static_cast<size_t>(n_out));
    cpu::linear(x2.data(), w.data(t), t, y2.data(), 4, n_in, n_out);
    CHECK(std::equal(y2.begin() + 3 * n_out, y2.end(), all.begin() + 5 * n_out));
  }
}

TEST_CASE("cpu::linear_multi gives each job exactly what linear() gives, with and without a pool", "[unit][kernels][linear]") {
  specchat::cpu::ThreadPool pool(3);
  const int n = 5;
  const Weights wa = make_weights(DType::f16, 70, 300, 1), wb = make_weights(DType::bf16, 33, 300, 2),
                wc = make_weights(DType::f16, 129, 300, 3);
  const std::vector<float> x = make_x(n, 300, 4);
  std::vector<float> ya(n * 70), yb(n * 33), yc(n * 129);
  const cpu::LinearJob jobs[3] = {{x.data(), wa.data(DType::f16), DType::f16, ya.data(), n, 300, 70},
                                  {x.data(), wb.data(DType::bf16), DType::bf16, yb.data(), n, 300, 33},
                                  {x.data(), wc.data(DType::f16), DType::f16, yc.data(), n, 300, 129}};
  for (specchat::cpu::ThreadPool* p : {static_cast<specchat::cpu::ThreadPool*>(nullptr), &pool}) {
    std::fill(ya.begin(), ya.end(), -1.0f);
    std::fill(yb.begin(), yb.end(), -1.0f);
    std::fill(yc.begin(), yc.end(), -1.0f);
    cpu::linear_multi(jobs, p);
    std::vector<float> wa1(ya.size()), wb1(yb.size()), wc1(yc.size());
    cpu::linear(x.data(), wa.data(DType::f16), DType::f16, wa1.data(), n, 300, 70);
    cpu::linear(x.data(), wb.data(DType::bf16), DType::bf16, wb1.data(), n, 300, 33);
    cpu::linear(x.data(), wc.data(DType::f16), DType::f16, wc1.data(), n, 300, 129);
    INFO((p ? "pool" : "serial"));
    CHECK(ya == wa1);
    CHECK(yb == wb1);
    CHECK(yc == wc1);
  }
}

TEST_CASE("every cpu::linear variant this CPU runs matches the scalar twin and is batch-invariant", "[unit][kernels][linear]") {
  const std::pair<cpu::LinearIsa, const char*> isas[] = {
      {cpu::LinearIsa::generic, "generic"}, {cpu::LinearIsa::avx2, "avx2"}, {cpu::LinearIsa::avx512, "avx512"}};
  int ran = 0;
  for (const auto& [isa, name] : isas) {
    if (!cpu::linear_isa_supported(isa)) {
      WARN("cpu::linear variant " << name << " not checked: this CPU lacks it");
      continue;
    }
    ++ran;
    for (DType t : {DType::f16, DType::bf16}) {
      // n_in a multiple of 16 too: one row of 16-bit weights takes its own AVX-512 path there
      // (rows_avx512_half), one chunk or several (2064 > 1024), whole blocks or a short last one.
      for (const auto& [n_in, n_out] :
           std::vector<std::pair<int, int>>{{37, 11}, {1100, 45}, {300, 130}, {128, 45}, {2064, 13}}) {
        const Weights w = make_weights(t, n_out, n_in, 3u + static_cast<uint32_t>(n_in));
        for (int n : {1, 2, 3, 5, 8, 17, 64}) {
          const std::vector<float> x = make_x(n, n_in, 9u + static_cast<uint32_t>(n));
          std::vector<float> got(static_cast<size_t>(n) * n_out), want(got.size());
          cpu::linear_with_isa(isa, x.data(), w.data(t), t, got.data(), n, n_in, n_out);
          cpu::linear_ref(x.data(), w.data(t), t, want.data(), n, n_in, n_out);
          double worst = 0;
          for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
          INFO(name << " " << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " rows " << n << " err " << worst);
          CHECK(worst <= 1e-5);  // same bound and reason as the dispatched test above
          // The last row alone gives the same bits as inside the batch.
          std::vector<float> one(static_cast<size_t>(n_out));
          cpu::linear_with_isa(isa, x.data() + static_cast<size_t>(n - 1) * n_in, w.data(t), t, one.data(), 1, n_in, n_out);
          CHECK(std::equal(one.begin(), one.end(), got.begin() + static_cast<long>(n - 1) * n_out));
        }
      }
    }
  }
  CHECK(ran >= 1);
}
