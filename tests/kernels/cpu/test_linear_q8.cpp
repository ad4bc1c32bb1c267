// cpu::linear's integer path (kernels/cpu/linear_q8.h, Activations::q8): the activation
// rounding on hand-made rows, every SIMD variant against the scalar twin bit for bit (random
// block bytes, so every weight value and scale pattern occurs; odd block counts; row counts
// that are not multiples of 4), the error against the exact f64 product within the bound the
// 8-bit rounding allows, and that x with NaN or huge values computes without fault.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_q8.h"
#include "kernels/cpu/quant.h"
#include "tests/kernels/cpu/block_weights.h"

using namespace specchat;
using namespace specchat::test;
namespace q8 = specchat::cpu::q8;

TEST_CASE("q8 activations: scale max|x| / 127, round half to even, clamp", "[unit][kernels][linear][quant]") {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = -63.5f;  // half: to even, -64
  x[2] = 0.5f;    // 0
  x[3] = 1.5f;    // 2
  x[4] = -127.0f;
  for (int i = 32; i < 64; ++i) x[static_cast<size_t>(i)] = 0.0f;  // an all-zero block: d = 0, q = 0
  for (const q8::Isa isa : {q8::Isa::generic, q8::Isa::avx2, q8::Isa::avx512}) {
    if (!q8::isa_supported(isa)) continue;
    q8::Act a;
    q8::quantize(isa, x.data(), 2, 32, a);  // two rows of one block each
    INFO("isa " << static_cast<int>(isa));
    CHECK(a.d[0] == 1.0f);
    CHECK(a.q[0] == 127);
    CHECK(a.q[1] == -64);
    CHECK(a.q[2] == 0);
    CHECK(a.q[3] == 2);
    CHECK(a.q[4] == -127);
    CHECK(a.d[1] == 0.0f);
    for (int i = 32; i < 64; ++i) CHECK(a.q[static_cast<size_t>(i)] == 0);
  }
  std::vector<float> odd(48);
  q8::Act a;
  CHECK_THROWS_AS(q8::quantize(q8::Isa::generic, odd.data(), 1, 48, a), std::invalid_argument);
}

TEST_CASE("q8 activations for k-quants: one scale per 256 values, the nibbles' storage order or natural order, sub-block sums", "[unit][kernels][linear][quant]") {
  // Row 0: values i − 128 (|x| ≤ 128: d = 128 / 127), a NaN-free super-block; row 1: an all-zero
  // super-block then one whose maximum is in its last sub-block.
  const int n_in = 512;
  std::vector<float> x(2 * static_cast<size_t>(n_in), 0.0f);
  for (int i = 0; i < 256; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 128);
  for (int i = 256; i < 512; ++i) x[static_cast<size_t>(i)] = 1.0f;
  float* r1 = x.data() + n_in;
  r1[256 + 255] = -254.0f;  // super-block 1 of row 1: d = 2, its ones round to 0 (0.5, half to even)
  r1[256 + 3] = 3.0f;       // 1.5 → 2
  for (const q8::Isa isa : {q8::Isa::generic, q8::Isa::avx2, q8::Isa::avx512}) {
    if (!q8::isa_supported(isa)) continue;
    INFO("isa " << static_cast<int>(isa));
    q8::Act a;
    q8::quantize(isa, x.data(), 2, n_in, a, nullptr, q8::Form::k256);
    REQUIRE(a.form == q8::Form::k256);
    CHECK(a.d[0] == 128.0f / 127.0f);
    CHECK(a.d[1] == 1.0f / 127.0f);
    CHECK(a.d[2] == 0.0f);
    CHECK(a.d[3] == 2.0f);
    // Value i of a super-block sits at k256_pos(i): 128-value halves as sub-blocks 0, 2, 1, 3.
    CHECK(q8::k256_pos(0) == 0);
    CHECK(q8::k256_pos(32) == 64);
    CHECK(q8::k256_pos(64) == 32);
    CHECK(q8::k256_pos(100) == 100);
    CHECK(q8::k256_pos(130) == 130);
    CHECK(q8::k256_pos(170) == 202);
    const int8_t* q0 = a.qrow(0);
    const float inv = 1.0f / (128.0f / 127.0f);
    int mismatches = 0;
    for (int i = 0; i < 256; ++i) {
      const int want = static_cast<int>(std::nearbyint(std::min(127.0f, std::max(-127.0f, static_cast<float>(i - 128) * inv))));
      mismatches += q0[q8::k256_pos(i)] != want;
    }
    CHECK(mismatches == 0);
    for (int j = 0; j < 8; ++j) {
      int sum = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) sum += q0[q8::k256_pos(i)];
      CHECK(a.brow(0)[j] == sum);
    }
    for (int j = 8; j < 16; ++j) CHECK(a.brow(0)[j] == 32 * 127);  // ones at d = 1/127
    const int8_t* q1 = a.qrow(1);
    for (int i = 0; i < 256; ++i) CHECK(q1[i] == 0);
    CHECK(q1[256 + q8::k256_pos(255)] == -127);
    CHECK(q1[256 + q8::k256_pos(3)] == 2);
    CHECK(a.brow(1)[8] == 2);
    CHECK(a.brow(1)[15] == -127);
  }
  // Form::k256n (q6_K): the same integers in natural order, a sum per 16 values.
  for (const q8::Isa isa : {q8::Isa::generic, q8::Isa::avx2, q8::Isa::avx512}) {
    if (!q8::isa_supported(isa)) continue;
    INFO("isa " << static_cast<int>(isa) << " (k256n)");
    q8::Act k, n;
    q8::quantize(isa, x.data(), 2, n_in, k, nullptr, q8::Form::k256);
    q8::quantize(isa, x.data(), 2, n_in, n, nullptr, q8::Form::k256n);
    REQUIRE(n.bsum_span() == 16);
    int moved = 0, sums = 0;
    for (int t = 0; t < 2; ++t) {
      CHECK(n.d[static_cast<size_t>(2 * t)] == k.d[static_cast<size_t>(2 * t)]);
      CHECK(n.d[static_cast<size_t>(2 * t + 1)] == k.d[static_cast<size_t>(2 * t + 1)]);
      for (int i = 0; i < n_in; ++i) moved += n.qrow(t)[i] != k.qrow(t)[256 * (i / 256) + q8::k256_pos(i % 256)];
      for (int j = 0; j < n_in / 32; ++j) sums += n.brow(t)[2 * j] + n.brow(t)[2 * j + 1] != k.brow(t)[j];
    }
    CHECK(moved == 0);
    CHECK(sums == 0);
    CHECK(n.brow(1)[16] == 2);  // values 256..271 of row 1: the 3 → 2, the rest 0
    CHECK(n.brow(1)[17] == 0);
  }
  std::vector<float> short_row(288);
  q8::Act a;
  CHECK_THROWS_AS(q8::quantize(q8::Isa::generic, short_row.data(), 1, 288, a, nullptr, q8::Form::k256), std::invalid_argument);
  // A kernel handed activations in the other form refuses them.
  q8::quantize(q8::Isa::generic, x.data(), 1, 256, a);
  const std::vector<uint8_t> w = random_blocks(DType::q4_k, 4, 5);
  std::vector<float> y(4);
  CHECK_THROWS_AS(q8::rows(q8::Isa::generic, a, w.data(), DType::q4_k, y.data(), 4, 0, 4), std::invalid_argument);
}

TEST_CASE("q8 activations: every variant gives the scalar twin's bits on random blocks", "[unit][kernels][linear][quant]") {
  const std::pair<cpu::LinearIsa, const char*> isas[] = {{cpu::LinearIsa::avx2, "avx2"}, {cpu::LinearIsa::avx512, "avx512"}};
  int ran = 0;
  for (const auto& [isa, name] : isas) {
    if (!cpu::linear_isa_supported(isa)) {
      WARN("cpu::linear variant " << name << " not checked on the integer path: this CPU lacks it");
      continue;
    }
    ++ran;
    for (DType t : kBlockTypes) {
      const int bs = dtype_block_size(t);
      // One block, an odd number (the 32-value types' lone last block), and a long row.
      for (const auto& [n_in, n_out] : std::vector<std::pair<int, int>>{{bs, 7}, {bs == 32 ? 5 * 32 : 3 * 256, 6}, {2048, 9}}) {
        const std::vector<uint8_t> w = random_blocks(t, n_out * n_in / bs, 91u + static_cast<uint32_t>(n_in));
        for (int n : {1, 2, 3, 4, 5, 7, 9}) {
          std::vector<float> x = uniform(static_cast<size_t>(n) * n_in, 2.0f, 7u + static_cast<uint32_t>(n));
          x[0] = 0.0f;  // a row starting with zeros, and one block all zero
          for (int i = 0; i < std::min(32, n_in); ++i) x[static_cast<size_t>((n - 1) * n_in + i)] = 0.0f;
          std::vector<float> got(static_cast<size_t>(n) * n_out), want(got.size());
          cpu::linear_with_isa(isa, x.data(), w.data(), t, got.data(), n, n_in, n_out, cpu::Activations::q8);
          cpu::linear_with_isa(cpu::LinearIsa::generic, x.data(), w.data(), t, want.data(), n, n_in, n_out,
                               cpu::Activations::q8);
          int differ = 0;
          for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
          INFO(name << " " << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " rows " << n);
          CHECK(differ == 0);
        }
      }
    }
  }
  if (ran == 0) WARN("no SIMD variant of the integer path on this CPU: only the scalar twin runs");
}

TEST_CASE("q8 activations: the error stays within what rounding x to 8 bits allows", "[unit][kernels][linear][quant]") {
  // |Σ w_i (x_i − x̂_i)| <= Σ_b (max|x|_b / 254) Σ_{i in b} |w_i|, plus f32 summation error;
  // b the activation blocks: 32 values, 256 for q4_K, q5_K and q6_K (Form::k256 / k256n).
  const int n_in = 1024, n_out = 13, n = 3;
  for (DType t : kBlockTypes) {
    const int bw = cpu::q8::form_for(t) == cpu::q8::Form::b32 ? 32 : 256;
    const std::vector<uint8_t> w = quantized_weights(t, n_out, n_in, 3);
    const std::vector<float> x = uniform(static_cast<size_t>(n) * n_in, 1.0f, 4);
    std::vector<float> got(static_cast<size_t>(n) * n_out), exact(got.size());
    cpu::linear(x.data(), w.data(), t, got.data(), n, n_in, n_out);  // the default: q8
    cpu::linear_ref(x.data(), w.data(), t, exact.data(), n, n_in, n_out);
    std::vector<float> wrow(n_in);
    double worst_ratio = 0;
    for (int j = 0; j < n_out; ++j) {
      cpu::dequantize_row_ref(t, w.data() + dtype_row_bytes(t, n_in) * static_cast<size_t>(j), wrow.data(), n_in);
      for (int r = 0; r < n; ++r) {
        const float* xr = x.data() + static_cast<size_t>(r) * n_in;
        double bound = 0, mag = 0;
        for (int b = 0; b < n_in / bw; ++b) {
          double amax = 0, wsum = 0;
          for (int i = bw * b; i < bw * b + bw; ++i) {
            amax = std::max(amax, std::fabs(static_cast<double>(xr[i])));
            wsum += std::fabs(static_cast<double>(wrow[static_cast<size_t>(i)]));
            mag += std::fabs(static_cast<double>(xr[i]) * wrow[static_cast<size_t>(i)]);
          }
          bound += amax / 254.0 * wsum;
        }
        const double err = std::fabs(static_cast<double>(got[static_cast<size_t>(r) * n_out + j]) -
                                     exact[static_cast<size_t>(r) * n_out + j]);
        INFO(dtype_name(t) << " out " << j << " row " << r << " err " << err << " bound " << bound);
        CHECK(err <= bound * 1.001 + mag * 1e-5);
        worst_ratio = std::max(worst_ratio, err / bound);
      }
    }
    // Rounding error that is a sum of many independent terms sits far below the worst case: a
    // result that reaches it means the integers or the scales are off.
    INFO(dtype_name(t) << " worst err / bound " << worst_ratio);
    CHECK(worst_ratio < 0.5);
  }
}

TEST_CASE("q8 activations: a NaN or infinite x makes every result it touches NaN", "[unit][kernels][linear][quant]") {
  // Regression: max / clamp skipped a NaN, so it became -127 · d and a damaged model's NaN
  // activations produced finite, normal-looking logits (the engine's non-finite check never
  // fired). A row with a NaN or an infinity must give non-finite results, as the f32 path does.
  const int n_in = 256, n_out = 5;
  for (DType t : kBlockTypes) {
    const std::vector<uint8_t> w = quantized_weights(t, n_out, n_in, 11);
    std::vector<float> x(3 * static_cast<size_t>(n_in), 0.25f);
    x[77] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<size_t>(n_in) + 200] = std::numeric_limits<float>::infinity();
    x[2 * static_cast<size_t>(n_in) + 5] = -std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(3 * static_cast<size_t>(n_out));
    for (const cpu::LinearIsa isa : {cpu::LinearIsa::generic, cpu::LinearIsa::avx2, cpu::LinearIsa::avx512}) {
      if (!cpu::linear_isa_supported(isa)) continue;
      cpu::linear_with_isa(isa, x.data(), w.data(), t, y.data(), 3, n_in, n_out, cpu::Activations::q8);
      for (size_t i = 0; i < y.size(); ++i) {
        INFO(dtype_name(t) << " isa " << static_cast<int>(isa) << " row " << i / n_out << " out " << i % n_out << " = " << y[i]);
        CHECK_FALSE(std::isfinite(y[i]));
      }
    }
  }
}

TEST_CASE("q8 activations: non-finite, huge and denormal x compute without fault", "[unit][kernels][linear][quant]") {
  const int n_in = 256, n_out = 4;
  for (DType t : kBlockTypes) {
    const std::vector<uint8_t> w = quantized_weights(t, n_out, n_in, 9);
    // Row 0: NaN and infinity (the results are not meaningful, the call must not fault).
    // Row 1: finite, with a huge value and a block whose maximum is denormal (1 / d overflows).
    std::vector<float> x(2 * static_cast<size_t>(n_in), 0.5f);
    x[3] = std::numeric_limits<float>::quiet_NaN();
    x[40] = std::numeric_limits<float>::infinity();
    float* r1 = x.data() + n_in;
    r1[100] = 1e30f;
    for (int i = 192; i < 224; ++i) r1[i] = i == 200 ? 1e-41f : 0.0f;
    std::vector<float> y(2 * static_cast<size_t>(n_out)), exact(y.size());
    cpu::linear_ref(x.data(), w.data(), t, exact.data(), 2, n_in, n_out);
    for (const cpu::LinearIsa isa : {cpu::LinearIsa::generic, cpu::LinearIsa::avx2, cpu::LinearIsa::avx512}) {
      if (!cpu::linear_isa_supported(isa)) continue;
      cpu::linear_with_isa(isa, x.data(), w.data(), t, y.data(), 2, n_in, n_out, cpu::Activations::q8);
      for (int j = 0; j < n_out; ++j) {
        INFO(dtype_name(t) << " isa " << static_cast<int>(isa) << " out " << j);
        const float got = y[static_cast<size_t>(n_out + j)], want = exact[static_cast<size_t>(n_out + j)];
        CHECK(std::isfinite(got));
        CHECK(std::fabs(got - want) <= 0.01f * std::fabs(want) + 1e27f);  // 1e30 · |w| / 254 · a few
      }
    }
  }
}
