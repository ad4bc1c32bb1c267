// cpu::pack_panels / cpu::linear_panels (kernels/cpu/linear_panels.h): the packed product
// against the row-major oracle cpu::linear_ref, every variant bit for bit against the generic
// twin, batch invariance, the pool, and linear_multi's panel jobs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/kernels/cpu/block_weights.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_panels.h"
#include "kernels/cpu/thread_pool.h"

using namespace specchat;

namespace {

// W [n_out, n_in] uniform in ±1/sqrt(n_in) rounded to t (f16 or bf16), row-major, and packed.
struct Packed {
  std::vector<uint16_t> rows, panels;
};
Packed make_packed(DType t, int n_out, int n_in, uint32_t seed) {
  const std::vector<float> f =
      test::uniform(static_cast<size_t>(n_out) * static_cast<size_t>(n_in), 1.0f / std::sqrt(static_cast<float>(n_in)), seed);
  Packed p;
  p.rows.resize(f.size());
  cpu::convert_from_f32(f.data(), p.rows.data(), t, static_cast<int64_t>(f.size()));
  p.panels.assign(cpu::panel_bytes(n_out, n_in) / sizeof(uint16_t), 0xFFFF);  // padding must be rewritten
  cpu::pack_panels(p.rows.data(), t, n_out, n_in, p.panels.data());
  return p;
}

// x [n, n_in] uniform in ±1.
std::vector<float> make_x(int n, int n_in, uint32_t seed) {
  return test::uniform(static_cast<size_t>(n) * static_cast<size_t>(n_in), 1.0f, seed);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("pack_panels lays out 16 output rows per panel k-major and zero-pads the last panel", "[unit][kernels][linear]") {
  const int n_out = 19, n_in = 5;  // two panels, the second with 3 real rows
  REQUIRE(cpu::panel_bytes(n_out, n_in) == 2u * 16u * 5u * 2u);
  std::vector<uint16_t> w(static_cast<size_t>(n_out) * n_in);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(i + 1);
  std::vector<uint16_t> p(cpu::panel_bytes(n_out, n_in) / 2, 0xFFFF);
  cpu::pack_panels(w.data(), DType::f16, n_out, n_in, p.data());
  for (int j = 0; j < 32; ++j) {
    for (int k = 0; k < n_in; ++k) {
      const uint16_t got = p[(static_cast<size_t>(j / 16) * n_in + k) * 16 + j % 16];
      CHECK(got == (j < n_out ? w[static_cast<size_t>(j) * n_in + k] : 0));
    }
  }
  CHECK_THROWS_AS(cpu::pack_panels(w.data(), DType::f32, n_out, n_in, p.data()), std::invalid_argument);
  CHECK_THROWS_AS(cpu::pack_panels(w.data(), DType::q8_0, n_out, n_in, p.data()), std::invalid_argument);
  CHECK_THROWS_AS(cpu::pack_panels(w.data(), DType::f16, 0, n_in, p.data()), std::invalid_argument);
}

TEST_CASE("linear_panels matches the row-major oracle for n = 1..64 rows, F16/BF16, odd sizes", "[unit][kernels][linear]") {
  // n_out not a multiple of 16 (a padded panel), n_in not a multiple of 8 or 32.
  const std::vector<std::pair<int, int>> shapes = {{37, 11}, {300, 45}, {513, 130}, {1000, 7}, {64, 16}};
  for (DType t : {DType::f16, DType::bf16}) {
    for (const auto& [n_in, n_out] : shapes) {
      const Packed w = make_packed(t, n_out, n_in, 3u + static_cast<uint32_t>(n_in));
      for (int n : {1, 2, 3, 5, 8, 9, 17, 32, 33, 64}) {
        const std::vector<float> x = make_x(n, n_in, 5u + static_cast<uint32_t>(n));
        std::vector<float> got(static_cast<size_t>(n) * n_out, -7.0f), want(got.size());
        cpu::linear_panels(x.data(), w.panels.data(), t, got.data(), n, n_in, n_out);
        cpu::linear_ref(x.data(), w.rows.data(), t, want.data(), n, n_in, n_out);
        // Exact products, f32 chain against double sums: ~n_in · 2^-24 · Σ|x·w| <= 1e-5 here.
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
        INFO(dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " rows " << n << " max abs err " << worst);
        CHECK(worst <= 1e-5);
      }
    }
  }
}

TEST_CASE("every linear_panels variant this CPU runs gives the generic twin's bits, batch-invariantly", "[unit][kernels][linear]") {
  const int n_in = 301, n_out = 83;
  for (DType t : {DType::f16, DType::bf16}) {
    const Packed w = make_packed(t, n_out, n_in, 9);
    for (int n : {1, 2, 4, 7, 8, 11, 16, 29, 64}) {
      const std::vector<float> x = make_x(n, n_in, 13u + static_cast<uint32_t>(n));
      std::vector<float> twin(static_cast<size_t>(n) * n_out);
      cpu::linear_panels_with_isa(cpu::LinearIsa::generic, x.data(), w.panels.data(), t, twin.data(), n, n_in, n_out);
      for (cpu::LinearIsa isa : {cpu::LinearIsa::avx2, cpu::LinearIsa::avx512}) {
        if (!cpu::linear_isa_supported(isa)) {
          WARN("SKIPPED: this CPU lacks linear variant " << static_cast<int>(isa));
          continue;
        }
        std::vector<float> got(twin.size());
        cpu::linear_panels_with_isa(isa, x.data(), w.panels.data(), t, got.data(), n, n_in, n_out);
        INFO(dtype_name(t) << " variant " << static_cast<int>(isa) << " rows " << n);
        CHECK(same_bits(got, twin));
      }
      // Each row alone gives the bits it gets in the batch.
      for (int r = 0; r < n; r += 3) {
        std::vector<float> one(static_cast<size_t>(n_out));
        cpu::linear_panels(x.data() + static_cast<size_t>(r) * n_in, w.panels.data(), t, one.data(), 1, n_in, n_out);
        const std::vector<float> in_batch(twin.begin() + static_cast<long>(r) * n_out,
                                          twin.begin() + static_cast<long>(r + 1) * n_out);
        INFO(dtype_name(t) << " rows " << n << " row " << r);
        CHECK(same_bits(one, in_batch));
      }
    }
  }
}

TEST_CASE("linear_panels on a pool and linear_multi's panel jobs give the serial bits", "[unit][kernels][linear]") {
  cpu::ThreadPool pool(2);
  const int n_in = 320, n = 8;
  const Packed a = make_packed(DType::f16, 867, n_in, 21), b = make_packed(DType::bf16, 45, n_in, 22);
  const std::vector<float> x = make_x(n, n_in, 23);
  std::vector<float> ya(static_cast<size_t>(n) * 867), yb(static_cast<size_t>(n) * 45);
  std::vector<float> sa(ya.size()), sb(yb.size());
  cpu::linear_panels(x.data(), a.panels.data(), DType::f16, sa.data(), n, n_in, 867);
  cpu::linear_panels(x.data(), b.panels.data(), DType::bf16, sb.data(), n, n_in, 45);
  cpu::linear_panels(x.data(), a.panels.data(), DType::f16, ya.data(), n, n_in, 867, &pool);
  CHECK(same_bits(ya, sa));
  std::fill(ya.begin(), ya.end(), 0.0f);
  const cpu::LinearJob jobs[2] = {{x.data(), a.panels.data(), DType::f16, ya.data(), n, n_in, 867, cpu::Activations::q8, true},
                                  {x.data(), b.panels.data(), DType::bf16, yb.data(), n, n_in, 45, cpu::Activations::q8, true}};
  cpu::linear_multi(jobs, &pool);
  CHECK(same_bits(ya, sa));
  CHECK(same_bits(yb, sb));
  // A panel job beside a row-major one: each still gets its own kernel's result.
  std::vector<float> yr(yb.size()), want_r(yb.size());
  cpu::linear(x.data(), b.rows.data(), DType::bf16, want_r.data(), n, n_in, 45);
  std::fill(ya.begin(), ya.end(), 0.0f);
  const cpu::LinearJob mixed[2] = {jobs[0], {x.data(), b.rows.data(), DType::bf16, yr.data(), n, n_in, 45}};
  cpu::linear_multi(mixed, &pool);
  CHECK(same_bits(ya, sa));
  CHECK(same_bits(yr, want_r));
}
