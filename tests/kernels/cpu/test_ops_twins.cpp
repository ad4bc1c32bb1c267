// [unit] tests of the CPU twins added for the CUDA kernels (kernels/cpu/{convert, embedding,
// sampling, kv_compact, matmul_typed}.h) on crafted inputs with known answers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_compact.h"
#include "kernels/cpu/matmul_typed.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/sampling.h"

using specchat::DType;
namespace cpu = specchat::cpu;

TEST_CASE("f16 and bf16 conversion round to nearest even with known bit patterns", "[unit]") {
  CHECK(cpu::f32_to_f16(1.0f) == 0x3c00);
  CHECK(cpu::f32_to_f16(-2.0f) == 0xc000);
  CHECK(cpu::f32_to_f16(-0.0f) == 0x8000);
  CHECK(cpu::f32_to_f16(65504.0f) == 0x7bff);        // largest f16
  CHECK(cpu::f32_to_f16(65519.0f) == 0x7bff);        // below the halfway point
  CHECK(cpu::f32_to_f16(65520.0f) == 0x7c00);        // halfway, odd mantissa: up to inf
  CHECK(cpu::f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);      // smallest subnormal
  CHECK(cpu::f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);      // tie -> even (0)
  CHECK(cpu::f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);      // 1.5 ulp tie -> even (2)
  CHECK(cpu::f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // tie -> even
  CHECK(cpu::f32_to_f16(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);  // tie -> even
  CHECK(std::isnan(cpu::f16_to_f32(cpu::f32_to_f16(std::nanf("")))));
  CHECK(cpu::f32_to_bf16(1.0f) == 0x3f80);
  CHECK(cpu::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);  // tie -> even
  CHECK(cpu::f32_to_bf16(1.0f + std::ldexp(3.0f, -8)) == 0x3f82);  // tie -> even
  CHECK(cpu::bf16_to_f32(0xc0a0) == -5.0f);
  CHECK(cpu::f16_to_f32(0x3555) == Approx(0.333251953125).epsilon(0));
  // Every finite f16 survives f16 -> f32 -> f16 unchanged.
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN payloads
    if (cpu::f32_to_f16(cpu::f16_to_f32(static_cast<uint16_t>(h))) != h) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("embedding gather widens f16 and bf16 rows exactly", "[unit]") {
  const int n_vocab = 5, d = 3;
  // Values exactly representable in bf16 and f16 (k / 64), so the expected row is known.
  std::vector<float> rows(static_cast<size_t>(n_vocab * d));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(static_cast<int>(i) - 7) / 64.0f;
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    std::vector<uint8_t> table(rows.size() * specchat::dtype_size(dt));
    cpu::convert_from_f32(rows.data(), table.data(), dt, static_cast<int64_t>(rows.size()));
    std::vector<float> out(ids.size() * d);
    cpu::embedding_gather(table.data(), dt, ids.data(), out.data(), static_cast<int>(ids.size()), d);
    for (size_t t = 0; t < ids.size(); ++t) {
      for (int i = 0; i < d; ++i) CHECK(out[t * d + i] == rows[static_cast<size_t>(ids[t] * d + i)]);
    }
  }
}

TEST_CASE("argmax top-k and top-p on crafted rows", "[unit]") {
  const std::vector<float> x = {1, 5, 3, 5, -2, 4,    // row 0: tie of 5 at 1 and 3
                                0, 0, 0, 0, 0, 0};   // row 1: all equal
  std::vector<int32_t> am(2);
  cpu::argmax_rows(x.data(), 2, 6, am.data());
  CHECK(am == std::vector<int32_t>{1, 0});
  std::vector<int32_t> ids(8);
  std::vector<float> vals(8);
  cpu::topk_rows(x.data(), 2, 6, 4, ids.data(), vals.data());
  CHECK(ids == std::vector<int32_t>{1, 3, 5, 2, 0, 1, 2, 3});
  CHECK(vals == std::vector<float>{5, 5, 4, 3, 0, 0, 0, 0});
  CHECK_THROWS_AS(cpu::topk_rows(x.data(), 2, 6, 7, ids.data(), vals.data()), std::invalid_argument);

  const std::vector<float> p = {0.5f, 0.25f, 0.125f, 0.125f};  // exact binary fractions
  const std::vector<std::pair<float, int>> cases = {{0.1f, 1}, {0.6f, 2}, {0.75f, 2}, {0.8f, 3}, {1.0f, 4}};
  for (const auto& [top_p, cut] : cases) {
    CAPTURE(top_p);
    auto r = p;
    int32_t kept = 0;
    cpu::topp_rows(r.data(), 1, 4, top_p, &kept);
    CHECK(kept == cut);
    double mass = 0;
    for (int i = 0; i < cut; ++i) mass += p[static_cast<size_t>(i)];
    for (int i = 0; i < 4; ++i) {
      CHECK(r[static_cast<size_t>(i)] == (i < cut ? static_cast<float>(p[static_cast<size_t>(i)] / mass) : 0.0f));
    }
  }
}

TEST_CASE("kv compaction moves path rows down in place across layers", "[unit]") {
  const int n_layer = 2, n_ctx = 12, row_floats = 3;
  const int64_t row_stride = 4, layer_stride = n_ctx * row_stride;
  std::vector<float> init(static_cast<size_t>(n_layer * layer_stride));
  for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i);
  const std::vector<std::pair<int, std::vector<int32_t>>> cases = {
      {0, {1, 2}}, {2, {3, 5, 6, 9}}, {4, {4, 5, 8}}, {1, {2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}};
  for (const auto& [dst0, path] : cases) {
    CAPTURE(dst0);
    auto c = init;
    cpu::kv_compact(c.data(), n_layer, layer_stride, row_stride, row_floats, path.data(),
                    static_cast<int>(path.size()), dst0);
    // Expected from the untouched copy: a gather, independent of the in-place order.
    auto want = init;
    for (int il = 0; il < n_layer; ++il) {
      for (size_t j = 0; j < path.size(); ++j) {
        for (int f = 0; f < row_floats; ++f) {
          want[static_cast<size_t>(il * layer_stride + (dst0 + static_cast<int>(j)) * row_stride + f)] =
              init[static_cast<size_t>(il * layer_stride + path[j] * row_stride + f)];
        }
      }
    }
    CHECK(c == want);
  }
  const std::vector<int32_t> down = {3, 2};
  CHECK_THROWS_AS(cpu::check_kv_path(down.data(), 2, 0), std::invalid_argument);
  const std::vector<int32_t> below = {1, 5};
  CHECK_THROWS_AS(cpu::check_kv_path(below.data(), 2, 2), std::invalid_argument);
}

TEST_CASE("random fill is deterministic and uniform on the symmetric interval", "[unit]") {
  const int64_t n = 20001;
  std::vector<float> a(static_cast<size_t>(n)), b(a.size()), c(a.size());
  cpu::random_fill(a.data(), DType::f32, n, 7, 0.5f);
  cpu::random_fill(b.data(), DType::f32, n, 7, 0.5f);
  cpu::random_fill(c.data(), DType::f32, n, 8, 0.5f);
  CHECK(a == b);
  CHECK(a != c);
  double mean = 0, lo = 1, hi = -1;
  for (float v : a) {
    mean += v;
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
  }
  mean /= static_cast<double>(n);
  CHECK(lo >= -0.5);
  CHECK(hi < 0.5);
  CHECK(lo < -0.49);
  CHECK(hi > 0.49);
  CHECK(std::abs(mean) < 0.01);  // sd of the mean: 0.5 / sqrt(3 n) = 0.002
  std::vector<uint16_t> h(a.size()), bf(a.size());
  cpu::random_fill(h.data(), DType::f16, n, 7, 0.5f);
  cpu::random_fill(bf.data(), DType::bf16, n, 7, 0.5f);
  for (size_t i = 0; i < a.size(); i += 97) {
    CHECK(h[i] == cpu::f32_to_f16(a[i]));
    CHECK(bf[i] == cpu::f32_to_bf16(a[i]));
  }
}

TEST_CASE("typed matmul twin equals the f32 product of the rounded inputs", "[unit]") {
  const int nt = 3, n_in = 37, n_out = 11;
  std::vector<float> x(static_cast<size_t>(nt * n_in)), w(static_cast<size_t>(n_out * n_in));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 13) - 6) / 8.0f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 16.0f;
  // These values are exact in f16 and bf16, so every dtype must give the f32 product.
  std::vector<float> want(static_cast<size_t>(nt * n_out));
  cpu::matmul(x.data(), w.data(), want.data(), nt, n_in, n_out);
  for (DType dt : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> wq(w.size());
    cpu::convert_from_f32(w.data(), wq.data(), dt, static_cast<int64_t>(w.size()));
    std::vector<float> y(want.size());
    cpu::matmul(x.data(), wq.data(), dt, y.data(), nt, n_in, n_out, nullptr, 0);
    CHECK(y == want);
  }
}

TEST_CASE("logsumexp_row: within 1e-6 of a long double reference at every length and the -inf cases", "[unit][kernels]") {
  std::mt19937 g(11);
  for (float scale : {0.5f, 5.0f, 30.0f}) {
    std::normal_distribution<float> nd(0, scale);
    for (int n : {1, 2, 15, 16, 17, 31, 100, 4096, 32001}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = nd(g);
      if (n > 3) x[static_cast<size_t>(n / 3)] = -std::numeric_limits<float>::infinity();  // a masked entry
      long double mx = -INFINITY;
      for (float v : x) mx = std::max<long double>(mx, v);
      long double sum = 0;
      for (float v : x) sum += std::exp(static_cast<long double>(v) - mx);
      const long double want = mx + std::log(sum);
      const double got = cpu::logsumexp_row(x.data(), n);
      INFO("scale " << scale << " n " << n << " got " << got << " want " << static_cast<double>(want));
      CHECK(std::fabs(got - static_cast<double>(want)) <= 1e-6 * std::max(1.0, std::fabs(static_cast<double>(want))));
    }
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> all_ninf(20, ninf);
  CHECK(cpu::logsumexp_row(all_ninf.data(), 20) == -INFINITY);
  CHECK(cpu::logsumexp_row(nullptr, 0) == -INFINITY);
  // One finite entry among -inf: exactly that entry (e^0 = 1 exactly; the padded and -inf
  // lanes add about 1.6e-38 each, nothing in double against 1).
  all_ninf[17] = 3.25f;
  CHECK(cpu::logsumexp_row(all_ninf.data(), 20) == 3.25);
}
