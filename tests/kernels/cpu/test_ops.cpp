// CPU ops against naive references on seeded random inputs with sizes that are not multiples of
// the vector width (STYLE.md §4). Tolerance: 1e-4 relative to the magnitude of the dot product
// (f32 summation order differs).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/ops.h"

using namespace specchat;

TEST_CASE("matmul matches the naive product for every batch size", "[unit][ops]") {
  std::mt19937 g(42);
  std::normal_distribution<float> nd;
  for (int n_in : {1, 7, 33, 320}) {
    for (int n_out : {1, 5, 130}) {
      for (int n : {1, 2, 3, 5, 11, 12, 13, 17, 40}) {
        std::vector<float> x(static_cast<size_t>(n) * n_in), w(static_cast<size_t>(n_out) * n_in), y(static_cast<size_t>(n) * n_out);
        for (auto& v : x) v = nd(g);
        for (auto& v : w) v = nd(g);
        cpu::matmul(x.data(), w.data(), y.data(), n, n_in, n_out);
        double worst = 0;
        for (int t = 0; t < n; ++t) {
          for (int j = 0; j < n_out; ++j) {
            double ref = 0, mag = 0;
            for (int i = 0; i < n_in; ++i) {
              ref += static_cast<double>(x[static_cast<size_t>(t * n_in + i)]) * w[static_cast<size_t>(j * n_in + i)];
              mag += std::fabs(static_cast<double>(x[static_cast<size_t>(t * n_in + i)]) * w[static_cast<size_t>(j * n_in + i)]);
            }
            worst = std::max(worst, std::fabs(ref - y[static_cast<size_t>(t * n_out + j)]) / (mag + 1e-12));
          }
        }
        INFO("n_in " << n_in << " n_out " << n_out << " n_tokens " << n);
        CHECK(worst < 1e-5);
      }
    }
  }
}

TEST_CASE("attention with a tree mask ignores invisible keys", "[unit][ops]") {
  // Two batch tokens over a 3-slot prefix; token 1 cannot see token 0. Changing token 0's K/V
  // must not change token 1's output.
  const int n_head = 2, head_dim = 4, kv_dim = n_head * head_dim, n_pre = 3, n = 2;
  std::mt19937 g(7);
  std::normal_distribution<float> nd;
  std::vector<float> q(static_cast<size_t>(n) * kv_dim), k(static_cast<size_t>(n_pre + n) * kv_dim), v(k.size());
  for (auto& x : q) x = nd(g);
  for (auto& x : k) x = nd(g);
  for (auto& x : v) x = nd(g);
  const uint8_t visible[] = {1, 0, 0, 1};  // [n_tokens, n_masked = 2]
  std::vector<float> out1(q.size()), out2(q.size()), scratch(16);
  cpu::AttentionArgs a{q.data(), k.data(), v.data(), kv_dim, n_pre, n_pre, n, n_head, n_head, head_dim, visible, out1.data(), scratch.data()};
  cpu::attention(a);
  for (int d = 0; d < kv_dim; ++d) {
    k[static_cast<size_t>(n_pre * kv_dim + d)] += 5.0f;
    v[static_cast<size_t>(n_pre * kv_dim + d)] -= 3.0f;
  }
  a.out = out2.data();
  cpu::attention(a);
  for (int d = 0; d < kv_dim; ++d) CHECK(out1[static_cast<size_t>(kv_dim + d)] == out2[static_cast<size_t>(kv_dim + d)]);
  bool changed = false;
  for (int d = 0; d < kv_dim; ++d) changed |= out1[static_cast<size_t>(d)] != out2[static_cast<size_t>(d)];
  CHECK(changed);
}

TEST_CASE("rope_with_table gives rope's values bit for bit", "[unit][kernels]") {
  const int n_pos = 300, head_dim = 40, n_head = 3, n = 7;
  std::vector<float> cs(static_cast<size_t>(n_pos) * head_dim / 2), sn(cs.size());
  cpu::rope_table(n_pos, head_dim, 10000.0f, cs.data(), sn.data());
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> a(static_cast<size_t>(n) * n_head * head_dim);
  for (float& v : a) v = u(g);
  std::vector<float> b = a;
  const int32_t pos[n] = {0, 1, 17, 128, 255, 299, 5};
  cpu::rope(a.data(), pos, n, n_head, head_dim, 10000.0f);
  cpu::rope_with_table(b.data(), pos, n, n_head, head_dim, cs.data(), sn.data());
  CHECK(a == b);
}

namespace {
// The rotation by hand, in double: pair i of the first n_rot dims of each head, partner i + 1
// (adjacent, at 2i) or i + n_rot / 2 (neox), angle p · scale · theta^(−2i / n_rot) / factor[i].
std::vector<float> rope_by_hand(std::vector<float> x, const std::vector<int32_t>& pos, int n_head, int head_dim,
                                const cpu::RopeParams& p) {
  const int half = p.n_rot / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int h = 0; h < n_head; ++h) {
      float* v = x.data() + (t * static_cast<size_t>(n_head) + static_cast<size_t>(h)) * static_cast<size_t>(head_dim);
      for (int i = 0; i < half; ++i) {
        double ang = pos[t] * std::pow(static_cast<double>(p.theta), -2.0 * i / p.n_rot) * p.freq_scale;
        if (p.freq_factors) ang /= p.freq_factors[i];
        const int a = p.neox ? i : 2 * i, b = p.neox ? i + half : 2 * i + 1;
        const double xa = v[a], xb = v[b];
        v[a] = static_cast<float>(xa * std::cos(ang) - xb * std::sin(ang));
        v[b] = static_cast<float>(xa * std::sin(ang) + xb * std::cos(ang));
      }
    }
  }
  return x;
}
}  // namespace

TEST_CASE("rope with model parameters: neox halves, partial rotary, linear scale, frequency factors", "[unit][kernels]") {
  const int n_pos = 64, head_dim = 40, n_head = 3;
  const std::vector<int32_t> pos = {0, 1, 17, 63, 5};
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> x(pos.size() * n_head * head_dim);
  for (float& v : x) v = u(g);
  std::vector<float> factors(20);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.37f * static_cast<float>(i);
  struct Case { int n_rot; bool neox; float scale; bool factors; };
  for (const Case c : {Case{40, false, 1.0f, false}, Case{40, true, 1.0f, false}, Case{24, false, 1.0f, false},
                       Case{24, true, 1.0f, false}, Case{40, false, 0.25f, false}, Case{40, false, 1.0f, true},
                       Case{40, true, 0.5f, true}}) {
    INFO("n_rot " << c.n_rot << " neox " << c.neox << " scale " << c.scale << " factors " << c.factors);
    cpu::RopeParams p;
    p.n_rot = c.n_rot;
    p.theta = 10000.0f;
    p.freq_scale = c.scale;
    p.freq_factors = c.factors ? factors.data() : nullptr;
    p.neox = c.neox;
    std::vector<float> cs(static_cast<size_t>(n_pos) * (c.n_rot / 2)), sn(cs.size());
    cpu::rope_table(n_pos, p, cs.data(), sn.data());
    std::vector<float> got = x;
    cpu::rope_with_table(got.data(), pos.data(), static_cast<int>(pos.size()), n_head, head_dim, p, cs.data(), sn.data());
    const std::vector<float> want = rope_by_hand(x, pos, n_head, head_dim, p);
    for (size_t i = 0; i < x.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-5));
    // Dimensions past n_rot pass through untouched.
    for (size_t t = 0; t < pos.size() * n_head; ++t) {
      for (int d = c.n_rot; d < head_dim; ++d) REQUIRE(got[t * head_dim + static_cast<size_t>(d)] == x[t * head_dim + static_cast<size_t>(d)]);
    }
  }
  // Full rotary, no scaling: the model-parameter table is rope_table()'s bit for bit.
  cpu::RopeParams p;
  p.n_rot = head_dim;
  std::vector<float> c1(static_cast<size_t>(n_pos) * head_dim / 2), s1(c1.size()), c2(c1.size()), s2(c1.size());
  cpu::rope_table(n_pos, head_dim, 10000.0f, c1.data(), s1.data());
  cpu::rope_table(n_pos, p, c2.data(), s2.data());
  CHECK(c1 == c2);
  CHECK(s1 == s2);
}

TEST_CASE("swiglu: within 1e-6 of silu with std::exp, and the same bits at every index and length", "[unit][kernels]") {
  // The vectorised exp (ops.cpp exp_silu) against libm, over the range where SiLU varies and
  // past the clamps, and each element independent of where it sits in the call.
  std::vector<float> g, u;
  for (float x = -120.0f; x <= 120.0f; x += 0.0137f) g.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.5f, -87.5f, 88.5f, -88.5f, 1e4f, -1e4f}) g.push_back(x);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> ud(-2.0f, 2.0f);
  for (size_t i = 0; i < g.size(); ++i) u.push_back(ud(rng));
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> out(g.size());
  cpu::swiglu(g.data(), u.data(), out.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    const double x = g[static_cast<size_t>(i)];
    const double want = x / (1.0 + std::exp(-x)) * u[static_cast<size_t>(i)];
    INFO("g = " << x);
    REQUIRE(std::isfinite(out[static_cast<size_t>(i)]));
    CHECK(std::fabs(out[static_cast<size_t>(i)] - want) <= 1e-6 * std::fabs(want) + 1e-30);
  }
  // Same bits whatever the offset and length of the call (batch invariance of the engine).
  for (int64_t off : {0, 1, 5, 17}) {
    for (int64_t len : {1, 3, 16, 31, 100}) {
      std::vector<float> part(static_cast<size_t>(len));
      cpu::swiglu(g.data() + off, u.data() + off, part.data(), len);
      for (int64_t i = 0; i < len; ++i) REQUIRE(part[static_cast<size_t>(i)] == out[static_cast<size_t>(off + i)]);
    }
  }
}

TEST_CASE("rmsnorm: within 1e-6 of a long double reference and the same bits in place and alone", "[unit][kernels]") {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0, 3);
  for (int d : {1, 5, 16, 17, 64, 320, 2049}) {
    const int n = 5;
    std::vector<float> x(static_cast<size_t>(n) * d), w(static_cast<size_t>(d)), out(x.size());
    for (auto& v : x) v = nd(g);
    for (auto& v : w) v = nd(g);
    const float eps = 1e-5f;
    cpu::rmsnorm(x.data(), w.data(), out.data(), n, d, eps);
    for (int t = 0; t < n; ++t) {
      long double ss = 0;
      for (int i = 0; i < d; ++i) ss += static_cast<long double>(x[static_cast<size_t>(t * d + i)]) * x[static_cast<size_t>(t * d + i)];
      const long double scale = 1.0L / std::sqrt(ss / d + eps);
      for (int i = 0; i < d; ++i) {
        const size_t k = static_cast<size_t>(t * d + i);
        const long double want = x[k] * scale * w[static_cast<size_t>(i)];
        INFO("d " << d << " row " << t << " col " << i);
        REQUIRE(std::fabs(static_cast<double>(out[k] - want)) <= 1e-6 * (1 + std::fabs(static_cast<double>(want))));
      }
      // One row alone gives that row's bits, and so does the row normalised in place.
      std::vector<float> one(static_cast<size_t>(d)), inplace(x.begin() + t * d, x.begin() + (t + 1) * d);
      cpu::rmsnorm(x.data() + static_cast<size_t>(t) * d, w.data(), one.data(), 1, d, eps);
      cpu::rmsnorm(inplace.data(), w.data(), inplace.data(), 1, d, eps);
      for (int i = 0; i < d; ++i) {
        REQUIRE(one[static_cast<size_t>(i)] == out[static_cast<size_t>(t * d + i)]);
        REQUIRE(inplace[static_cast<size_t>(i)] == out[static_cast<size_t>(t * d + i)]);
      }
    }
  }
}
