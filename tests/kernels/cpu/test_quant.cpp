// The block weight types (q8_0, q4_0, q4_K, q5_K, q6_K): the SIMD dequantizer against the scalar
// reference, hand-made blocks against the ggml layout, quantize/dequantize round trips, and
// cpu::linear on block weights against its scalar twin (every ISA variant, batch sizes 1..64,
// row counts that are not multiples of 32) with batch invariance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequant_simd.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/cpu/block_weights.h"

using namespace specchat;

namespace {

using namespace specchat::test;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace

TEST_CASE("quant: the AVX2 dequantizer gives the scalar reference's bits on random blocks", "[unit][kernels][quant]") {
  if (!cpu::dequant_avx2_supported()) {
    WARN("dequantize_row_avx2 not checked: this CPU lacks avx2+fma+f16c");
    return;
  }
  for (DType t : kBlockTypes) {
    const int nb = 37;  // not a multiple of anything the kernels tile by
    const std::vector<uint8_t> blocks = random_blocks(t, nb, 100u + static_cast<uint32_t>(t));
    const int64_t n = static_cast<int64_t>(nb) * dtype_block_size(t);
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), -7.0f);
    cpu::dequantize_row_ref(t, blocks.data(), want.data(), n);
    cpu::dequantize_row_avx2(t, blocks.data(), got.data(), n);
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += std::memcmp(&want[i], &got[i], sizeof(float)) != 0;
    INFO(dtype_name(t));
    CHECK(differ == 0);
  }
}

TEST_CASE("quant: hand-made blocks decode as the ggml layout says", "[unit][kernels][quant]") {
  // q4_K: d = 1, dmin = 0.5; sub-block 1 (scales[1] = 3, scales[5] = 2) and sub-block 6 (scale
  // 0x25 = low nibble 5 of scales[10], high bits 10 in scales[2] >> 6; min 0x11 = high nibble 1
  // of scales[10], high bits 01 in scales[6] >> 6); value l of sub-block 1 is the high nibble of
  // qs[l], value l of sub-block 6 the low nibble of qs[96 + l].
  cpu::BlockQ4K k{};
  k.d = cpu::f32_to_f16(1.0f);
  k.dmin = cpu::f32_to_f16(0.5f);
  k.scales[1] = 3;
  k.scales[5] = 2;
  k.scales[10] = 0x15;
  k.scales[2] = 0x80;
  k.scales[6] = 0x40;
  k.qs[7] = 0x90;                // sub-block 1 value 7: q = 9
  k.qs[96 + 3] = 0x0C;           // sub-block 6 value 3: q = 12
  std::vector<float> y(256);
  cpu::dequantize_row_ref(DType::q4_k, &k, y.data(), 256);
  CHECK(y[32 + 7] == 3.0f * 9 - 0.5f * 2);
  CHECK(y[6 * 32 + 3] == 37.0f * 12 - 0.5f * 17);
  CHECK(y[6 * 32 + 4] == -0.5f * 17);
  // q5_K: the fifth bit of value l of sub-block s is bit s of qh[l].
  cpu::BlockQ5K k5{};
  k5.d = cpu::f32_to_f16(1.0f);
  k5.scales[3] = 1;  // sub-block 3: scale 1, min 0
  k5.qs[32 + 2] = 0x70;
  k5.qh[2] = 1 << 3;
  cpu::dequantize_row_ref(DType::q5_k, &k5, y.data(), 256);
  CHECK(y[3 * 32 + 2] == 7.0f + 16.0f);
  // q6_K: value 128 + 64 + 5 is the high nibble of ql[64 + 5] with bits 4-5 of qh[32 + 5], scale
  // scales[8 + 4] (sub-block 12).
  cpu::BlockQ6K k6{};
  k6.d = cpu::f32_to_f16(0.25f);
  k6.scales[12] = -3;
  k6.ql[64 + 5] = 0xA0;
  k6.qh[32 + 5] = 0x20;  // bits 4-5 = 2
  cpu::dequantize_row_ref(DType::q6_k, &k6, y.data(), 256);
  CHECK(y[192 + 5] == 0.25f * -3.0f * static_cast<float>((0xA | (2 << 4)) - 32));
  CHECK(y[0] == 0.0f);  // scale 0
}

TEST_CASE("quant: quantize then dequantize stays within each type's quantization error", "[unit][kernels][quant]") {
  // Gaussian weights, 64 super-blocks. Bounds: q8_0 and q4_0 per value (half a step of the block's
  // f16 scale, q4_0 a full step at the clamped end), and every type by the relative RMS error:
  // measured 0.0051 (q8_0), 0.082 (q4_0), 0.070 (q4_K), 0.035 (q5_K), 0.017 (q6_K) on this data;
  // the bounds leave ~20% margin, so a broken fit or scale packing (errors of 2x) fails.
  std::mt19937 g(42);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = nd(g);
  x[5] = 0;  // a zero, and a constant block (the scale fit must not divide by zero)
  std::fill(x.begin() + 256, x.begin() + 512, 0.125f);
  const struct {
    DType t;
    double rel_rms;
  } cases[] = {{DType::q8_0, 0.006}, {DType::q4_0, 0.1}, {DType::q4_k, 0.085}, {DType::q5_k, 0.043}, {DType::q6_k, 0.021}};
  for (const auto& c : cases) {
    std::vector<uint8_t> q(dtype_row_bytes(c.t, x.size()));
    cpu::quantize_row(c.t, x.data(), q.data(), static_cast<int64_t>(x.size()));
    std::vector<float> y(x.size());
    cpu::dequantize_row_ref(c.t, q.data(), y.data(), static_cast<int64_t>(y.size()));
    double se = 0, sx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      se += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
      sx += static_cast<double>(x[i]) * x[i];
    }
    const double rel = std::sqrt(se / sx);
    INFO(dtype_name(c.t) << " relative RMS error " << rel);
    CHECK(rel <= c.rel_rms);
    CHECK(rel > 0);
    // The constant block comes back close (k-quants: through the min, q8_0/q4_0: exactly d·q).
    for (int i = 256; i < 512; ++i) CHECK(std::fabs(y[static_cast<size_t>(i)] - 0.125f) <= 0.125f * 0.01f);
    if (c.t == DType::q8_0 || c.t == DType::q4_0) {  // per-value bound
      const int bs = dtype_block_size(c.t);
      for (size_t b = 0; b < x.size() / static_cast<size_t>(bs); ++b) {
        float amax = 0;
        for (int i = 0; i < bs; ++i) amax = std::max(amax, std::fabs(x[b * bs + i]));
        const float step = c.t == DType::q8_0 ? amax / 127.0f : amax / 8.0f;
        const float bound = (c.t == DType::q8_0 ? 0.5f : 1.0f) * step * 1.002f + 1e-9f;
        float worst = 0;
        for (int i = 0; i < bs; ++i) worst = std::max(worst, std::fabs(y[b * bs + i] - x[b * bs + i]));
        if (worst > bound) FAIL_CHECK(dtype_name(c.t) << " block " << b << " error " << worst << " > " << bound);
      }
    }
  }
  // Bad input: not whole blocks, element types, non-finite values.
  std::vector<uint8_t> out(1024);
  CHECK_THROWS_AS(cpu::quantize_row(DType::q4_k, x.data(), out.data(), 100), std::invalid_argument);
  CHECK_THROWS_AS(cpu::quantize_row(DType::f16, x.data(), out.data(), 32), std::invalid_argument);
  std::vector<float> bad(32, 1.0f);
  bad[3] = NAN;
  CHECK_THROWS_AS(cpu::quantize_row(DType::q8_0, bad.data(), out.data(), 32), std::invalid_argument);
  CHECK_THROWS_AS(cpu::dequantize_row_ref(DType::q8_0, out.data(), bad.data(), 31), std::invalid_argument);
}

TEST_CASE("cpu::linear's f32 path on block weights matches its scalar twin on every variant, 1..64 rows", "[unit][kernels][linear][quant]") {
  const std::pair<cpu::LinearIsa, const char*> isas[] = {
      {cpu::LinearIsa::generic, "generic"}, {cpu::LinearIsa::avx2, "avx2"}, {cpu::LinearIsa::avx512, "avx512"}};
  int ran = 0;
  for (const auto& [isa, name] : isas) {
    if (!cpu::linear_isa_supported(isa)) {
      WARN("cpu::linear variant " << name << " not checked on block weights: this CPU lacks it");
      continue;
    }
    ++ran;
    for (DType t : kBlockTypes) {
      const int bs = dtype_block_size(t);
      // n_in: one block, several, and past the 1024-column tile; n_out not multiples of 32 or 4.
      const std::vector<std::pair<int, int>> shapes = {{bs, 37}, {5 * bs, 5}, {bs == 32 ? 1056 : 1280, 130}};
      for (const auto& [n_in, n_out] : shapes) {
        const std::vector<uint8_t> w = quantized_weights(t, n_out, n_in, 17u + static_cast<uint32_t>(n_in));
        const std::vector<int> batches = n_in == shapes[0].first ? [] {
          std::vector<int> all;
          for (int n = 1; n <= 64; ++n) all.push_back(n);
          return all;
        }() : std::vector<int>{1, 2, 3, 4, 5, 8, 17, 33, 64};
        for (int n : batches) {
          const std::vector<float> x = uniform(static_cast<size_t>(n) * n_in, 1.0f, 23u + static_cast<uint32_t>(n));
          std::vector<float> got(static_cast<size_t>(n) * n_out), want(got.size());
          cpu::linear_with_isa(isa, x.data(), w.data(), t, got.data(), n, n_in, n_out, cpu::Activations::f32);
          cpu::linear_ref(x.data(), w.data(), t, want.data(), n, n_in, n_out);
          // The dequantized weights are the twin's bit for bit; only the f32 sums differ from the
          // double ones: <= n_in · 2^-24 · Σ|x·w| <= 1280 · 6e-8 · sqrt(1280) · 1.1 ~ 3e-3 in the
          // worst case, ~1e-6 in practice (random signs); 2e-5 as for 16-bit weights.
          const double err = max_abs_diff(got, want);
          INFO(name << " " << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " rows " << n << " err " << err);
          CHECK(err <= 2e-5);
          std::vector<float> one(static_cast<size_t>(n_out));
          cpu::linear_with_isa(isa, x.data() + static_cast<size_t>(n - 1) * n_in, w.data(), t, one.data(), 1, n_in, n_out,
                               cpu::Activations::f32);
          CHECK(std::equal(one.begin(), one.end(), got.begin() + static_cast<long>(n - 1) * n_out));
        }
      }
    }
  }
  CHECK(ran >= 1);
}

TEST_CASE("cpu::linear on block weights is batch-invariant with the pool and in linear_multi", "[unit][kernels][linear][quant]") {
  cpu::ThreadPool pool(3);
  const int n_in = 1280, n_out = 77, n = 21;
  for (const cpu::Activations act : {cpu::Activations::q8, cpu::Activations::f32}) {
    for (DType t : kBlockTypes) {
      const std::vector<uint8_t> w = quantized_weights(t, n_out, n_in, 5);
      const std::vector<float> x = uniform(static_cast<size_t>(n) * n_in, 1.0f, 6);
      std::vector<float> all(static_cast<size_t>(n) * n_out);
      cpu::linear(x.data(), w.data(), t, all.data(), n, n_in, n_out, &pool, act);
      for (int r = 0; r < n; ++r) {
        std::vector<float> one(static_cast<size_t>(n_out));
        cpu::linear(x.data() + static_cast<size_t>(r) * n_in, w.data(), t, one.data(), 1, n_in, n_out, nullptr, act);
        INFO(dtype_name(t) << " row " << r << (act == cpu::Activations::q8 ? " q8" : " f32"));
        CHECK(std::equal(one.begin(), one.end(), all.begin() + static_cast<long>(r) * n_out));
      }
      // A mixed job list (block + f16), one pool region: each output as linear() alone.
      std::vector<uint16_t> w16(static_cast<size_t>(n_out) * n_in);
      const std::vector<float> wf = uniform(w16.size(), 0.03f, 8);
      cpu::convert_from_f32(wf.data(), w16.data(), DType::f16, static_cast<int64_t>(w16.size()));
      std::vector<float> ya(all.size()), yb(all.size()), yb1(all.size());
      const cpu::LinearJob jobs[2] = {{x.data(), w.data(), t, ya.data(), n, n_in, n_out, act},
                                      {x.data(), w16.data(), DType::f16, yb.data(), n, n_in, n_out}};
      cpu::linear_multi(jobs, &pool);
      cpu::linear(x.data(), w16.data(), DType::f16, yb1.data(), n, n_in, n_out);
      CHECK(ya == all);
      CHECK(yb == yb1);
    }
  }
  // Rows that are not whole blocks are refused, not read past.
  std::vector<uint8_t> w(1024);
  std::vector<float> x(100), y(4);
  CHECK_THROWS_AS(cpu::linear(x.data(), w.data(), DType::q4_k, y.data(), 1, 100, 4), std::invalid_argument);
}

TEST_CASE("embedding_gather dequantizes rows of block tables", "[unit][kernels][quant]") {
  const int d = 512, n_vocab = 9;
  for (DType t : kBlockTypes) {
    const std::vector<uint8_t> table = quantized_weights(t, n_vocab, d, 3);
    const std::vector<int32_t> ids = {8, 0, 3, 3};
    std::vector<float> out(ids.size() * d), row(d);
    cpu::embedding_gather(table.data(), t, ids.data(), out.data(), static_cast<int>(ids.size()), d);
    for (size_t i = 0; i < ids.size(); ++i) {
      cpu::dequantize_row_ref(t, table.data() + dtype_row_bytes(t, d) * static_cast<size_t>(ids[i]), row.data(), d);
      INFO(dtype_name(t) << " id " << ids[i]);
      CHECK(std::equal(row.begin(), row.end(), out.begin() + static_cast<long>(i) * d));
    }
  }
}

TEST_CASE("random_fill_blocks: finite values within a few times the amplitude and deterministic per seed", "[quant]") {
  const float a = 1.0f / 64.0f;
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    CAPTURE(dtype_name(t));
    const int64_t n = 4 * 256;
    const size_t bytes = dtype_row_bytes(t, static_cast<uint64_t>(n));
    std::vector<uint8_t> w(bytes), w2(bytes), other(bytes);
    cpu::random_fill_blocks(w.data(), t, n, 9, a);
    cpu::random_fill_blocks(w2.data(), t, n, 9, a);
    cpu::random_fill_blocks(other.data(), t, n, 10, a);
    CHECK(w == w2);
    CHECK(w != other);
    std::vector<float> v(static_cast<size_t>(n));
    cpu::dequantize_row_ref(t, w.data(), v.data(), n);
    float worst = 0.0f;
    double sum_sq = 0.0;
    for (float x : v) {
      REQUIRE(std::isfinite(x));
      worst = std::max(worst, std::fabs(x));
      sum_sq += static_cast<double>(x) * x;
    }
    CHECK(worst <= 4.0f * a);
    CHECK(std::sqrt(sum_sq / static_cast<double>(n)) >= 0.05 * a);  // not all zero: real spread
  }
  std::vector<uint8_t> buf(64);
  CHECK_THROWS_AS(cpu::random_fill_blocks(buf.data(), DType::f16, 16, 1, a), std::invalid_argument);
  CHECK_THROWS_AS(cpu::random_fill_blocks(buf.data(), DType::q8_0, 31, 1, a), std::invalid_argument);
}
