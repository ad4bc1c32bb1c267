// The AVX2 copies of the small element-wise ops against their generic twins, bit for bit
// (kernels/cpu/ops_simd.h), on seeded random inputs whose lengths are not multiples of the
// vector widths, and the public entry points against the twins.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_simd.h"

namespace cpu = specchat::cpu;
namespace simd = specchat::cpu::simd;

namespace {

std::vector<float> randoms(size_t n, uint32_t seed, float a = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The rotation tables rope_table writes, for n_pos positions.
void tables(int n_pos, const cpu::RopeParams& p, std::vector<float>& cs, std::vector<float>& sn) {
  cs.assign(static_cast<size_t>(n_pos) * (p.n_rot / 2), 0.0f);
  sn.assign(cs.size(), 0.0f);
  cpu::rope_table(n_pos, p, cs.data(), sn.data());
}

}  // namespace

TEST_CASE("rmsnorm and add_inplace: the AVX2 copies give the generic twins' bits", "[unit][kernels]") {
  if (!simd::avx2_available()) {
    WARN("SKIPPED: this CPU lacks AVX2 + FMA + F16C, so the AVX2 copies cannot run");
    return;
  }
  for (int d : {1, 7, 8, 15, 16, 17, 40, 320, 333, 2048}) {
    for (int rows : {1, 3, 8}) {
      const auto x = randoms(static_cast<size_t>(rows) * d, 11u + static_cast<uint32_t>(d * 7 + rows));
      const auto w = randoms(static_cast<size_t>(d), 99u + static_cast<uint32_t>(d));
      std::vector<float> o_ref(x.size()), o_simd(x.size(), -1.0f), o_pub(x.size(), -2.0f);
      simd::rmsnorm_generic(x.data(), w.data(), o_ref.data(), rows, d, 1e-5f);
      simd::rmsnorm_avx2(x.data(), w.data(), o_simd.data(), rows, d, 1e-5f);
      cpu::rmsnorm(x.data(), w.data(), o_pub.data(), rows, d, 1e-5f);
      INFO("d " << d << " rows " << rows);
      CHECK(same_bits(o_ref, o_simd));
      CHECK(same_bits(o_ref, o_pub));
      // In place (the qwen3 head norms): the same bits as out of place.
      std::vector<float> inplace = x;
      simd::rmsnorm_avx2(inplace.data(), w.data(), inplace.data(), rows, d, 1e-5f);
      CHECK(same_bits(o_ref, inplace));

      auto a_ref = x, a_simd = x;
      const auto y = randoms(x.size(), 5u + static_cast<uint32_t>(d));
      simd::add_inplace_generic(a_ref.data(), y.data(), static_cast<int64_t>(y.size()));
      simd::add_inplace_avx2(a_simd.data(), y.data(), static_cast<int64_t>(y.size()));
      CHECK(same_bits(a_ref, a_simd));
    }
  }
}

TEST_CASE("rope: the AVX2 copy gives the twin's bits for adjacent pairs and neox halves", "[unit][kernels]") {
  if (!simd::avx2_available()) {
    WARN("SKIPPED: this CPU lacks AVX2 + FMA + F16C, so the AVX2 copies cannot run");
    return;
  }
  struct Shape {
    int head_dim, n_rot;
    bool neox;
  };
  // Head sizes of the bundled target (40), common models (64, 128), odd pair counts (22 = 11
  // pairs), partial rotary (n_rot < head_dim) and pair counts below one vector (6).
  // Odd rotated counts (7, 9, 15: no loader accepts them today, but rope_with_table(head_dim)
  // takes any head) rotate n_rot / 2 pairs and pass the last dimension through, as the twin
  // (regression: the AVX2 copy rotated it against an unset table entry).
  const Shape shapes[] = {{40, 40, false}, {40, 40, true}, {64, 64, false}, {128, 128, true}, {22, 22, false},
                          {22, 22, true},  {64, 32, false}, {64, 32, true}, {80, 6, false},  {80, 6, true},
                          {16, 7, false},  {16, 9, false},  {16, 15, false}, {16, 15, true}, {15, 15, false}};
  for (const Shape& sh : shapes) {
    cpu::RopeParams p;
    p.n_rot = sh.n_rot;
    p.neox = sh.neox;
    p.theta = 10000.0f;
    std::vector<float> cs, sn;
    tables(300, p, cs, sn);
    const int n_tokens = 5, n_head = 3;
    const std::vector<int32_t> pos = {0, 1, 17, 255, 299};
    const auto x = randoms(static_cast<size_t>(n_tokens) * n_head * sh.head_dim, 3u + static_cast<uint32_t>(sh.head_dim));
    auto r_ref = x, r_simd = x, r_pub = x;
    simd::rope_generic(r_ref.data(), pos.data(), n_tokens, n_head, sh.head_dim, p, cs.data(), sn.data());
    simd::rope_avx2(r_simd.data(), pos.data(), n_tokens, n_head, sh.head_dim, p, cs.data(), sn.data());
    cpu::rope_with_table(r_pub.data(), pos.data(), n_tokens, n_head, sh.head_dim, p, cs.data(), sn.data());
    INFO("head_dim " << sh.head_dim << " n_rot " << sh.n_rot << " neox " << sh.neox);
    CHECK(same_bits(r_ref, r_simd));
    CHECK(same_bits(r_ref, r_pub));
    CHECK(!same_bits(x, r_ref));  // position 17 and later really rotate
  }
}

TEST_CASE("f16 conversion: F16C gives f32_to_f16's bits on a sweep of f32 patterns and every f16", "[unit][kernels]") {
  if (!simd::avx2_available()) {
    WARN("SKIPPED: this CPU lacks AVX2 + FMA + F16C, so the AVX2 copies cannot run");
    return;
  }
  // Every 4099th f32 bit pattern (both signs, every exponent: normals, f16 subnormals, overflow,
  // inf and NaNs with many payloads), plus halfway cases around 1 and at the subnormal edge.
  std::vector<float> src;
  for (uint64_t b = 0; b < (1ull << 32); b += 4099) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    src.push_back(f);
  }
  for (float f : {1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11), std::ldexp(1.0f, -25),
                  std::ldexp(3.0f, -25), 65519.0f, 65520.0f, -65520.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::signaling_NaN(),
                  std::numeric_limits<float>::denorm_min(), 0.0f, -0.0f}) {
    src.push_back(f);
  }
  src.push_back(1.5f);  // a tail of 1-7 values for the scalar end
  std::vector<uint16_t> ref(src.size()), got(src.size(), 0xFFFF);
  simd::f32_to_f16_generic(src.data(), ref.data(), static_cast<int64_t>(src.size()));
  simd::f32_to_f16_avx2(src.data(), got.data(), static_cast<int64_t>(src.size()));
  size_t bad = 0;
  for (size_t i = 0; i < src.size(); ++i) bad += ref[i] != got[i];
  CHECK(bad == 0);
  std::vector<uint16_t> pub(src.size(), 0xFFFF);
  cpu::convert_from_f32(src.data(), pub.data(), specchat::DType::f16, static_cast<int64_t>(src.size()));
  CHECK(pub == ref);

  std::vector<uint16_t> all(65536 + 3);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> w_ref(all.size()), w_got(all.size(), -1.0f), w_pub(all.size(), -2.0f);
  simd::f16_to_f32_generic(all.data(), w_ref.data(), static_cast<int64_t>(all.size()));
  simd::f16_to_f32_avx2(all.data(), w_got.data(), static_cast<int64_t>(all.size()));
  cpu::convert_to_f32(all.data(), specchat::DType::f16, w_pub.data(), static_cast<int64_t>(all.size()));
  CHECK(same_bits(w_ref, w_got));
  CHECK(same_bits(w_ref, w_pub));
}
