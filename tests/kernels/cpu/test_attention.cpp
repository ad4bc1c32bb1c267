// cpu::attention (the AVX2 kernel where it applies) against its scalar twin cpu::attention_ref
// on seeded random inputs: head sizes that are and are not multiples of 8, GQA groups of 1, 2,
// 4 and 7 (Qwen2.5-7B's 28 / 4), tree masks, prefixes of every length mod 4 (the kernel's
// key blocks), serial and on a pool. The kernel promises the reference's arithmetic (bit for
// bit on AVX2 machines); the check allows a few ulps of slack (kSlack) so a compiler that contracts the
// reference differently cannot fail it, while a wrong index fails it by orders of magnitude.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/attention_ref.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

using namespace specchat;

namespace {

struct Case {
  int n_head, n_head_kv, head_dim, kv_pos0, n_tokens;
  bool tree;  // the batch rows see only some of each other (a draft tree), else causal-free prefix
};

struct Inputs {
  std::vector<float> q, k, v;
  std::vector<uint8_t> visible;
  int64_t kv_stride = 0;
};

Inputs make_inputs(const Case& c, std::mt19937& g) {
  std::normal_distribution<float> nd;
  Inputs in;
  in.kv_stride = static_cast<int64_t>(c.n_head_kv) * c.head_dim + 3;  // padded rows, as a strided cache
  const int n_keys = c.kv_pos0 + c.n_tokens;
  in.q.resize(static_cast<size_t>(c.n_tokens) * c.n_head * c.head_dim);
  in.k.resize(static_cast<size_t>(n_keys) * static_cast<size_t>(in.kv_stride));
  in.v.resize(in.k.size());
  for (float& x : in.q) x = 2.0f * nd(g);
  for (float& x : in.k) x = nd(g);
  for (float& x : in.v) x = nd(g);
  // Row i sees its own slot always; other batch slots at random when `tree`, else all of them.
  in.visible.assign(static_cast<size_t>(c.n_tokens) * c.n_tokens, 1);
  if (c.tree) {
    std::bernoulli_distribution coin(0.5);
    for (int i = 0; i < c.n_tokens; ++i) {
      for (int j = 0; j < c.n_tokens; ++j) in.visible[static_cast<size_t>(i * c.n_tokens + j)] = (i == j || coin(g)) ? 1 : 0;
    }
  }
  return in;
}

cpu::AttentionArgs args_of(const Case& c, Inputs& in, std::vector<float>& out) {
  out.assign(in.q.size(), -7.0f);
  cpu::AttentionArgs a{};
  a.q = in.q.data();
  a.k_cache = in.k.data();
  a.v_cache = in.v.data();
  a.kv_stride = in.kv_stride;
  a.kv_pos0 = c.kv_pos0;
  a.n_prefix = c.kv_pos0;
  a.n_tokens = c.n_tokens;
  a.n_head = c.n_head;
  a.n_head_kv = c.n_head_kv;
  a.head_dim = c.head_dim;
  a.visible = in.visible.data();
  a.out = out.data();
  a.scratch = nullptr;
  return a;
}

// The twins' slack: the reference's dot products and V sums are plain loops that the compiler may
// or may not contract into FMAs (optimisation level, sanitizers, -march); an -O1 ASan build
// differed by 1.03e-6 on outputs of magnitude ~1 (a few ulps), while a wrong index or a skipped
// key is off by 1e-2 or more.
constexpr double kSlack = 4e-6;

double worst_diff(const std::vector<float>& x, const std::vector<float>& y) {
  double w = 0;
  for (size_t i = 0; i < x.size(); ++i) w = std::max(w, std::fabs(static_cast<double>(x[i]) - y[i]));
  return w;
}

}  // namespace

TEST_CASE("attention matches its scalar twin for every head size, GQA group and mask", "[unit][kernels]") {
  std::mt19937 g(20261202);
  cpu::ThreadPool pool(2);
  for (const Case& c : {Case{8, 4, 40, 0, 1, false}, Case{8, 4, 40, 1, 1, false}, Case{8, 4, 40, 2, 1, false},
                        Case{8, 4, 40, 3, 4, true}, Case{8, 4, 40, 257, 1, false}, Case{8, 4, 40, 255, 9, true},
                        Case{8, 8, 64, 100, 5, true}, Case{32, 8, 128, 61, 3, true}, Case{28, 4, 128, 37, 2, true},
                        Case{4, 4, 8, 13, 17, true}, Case{6, 2, 36, 50, 4, true}, Case{4, 1, 20, 9, 3, false}}) {
    INFO("heads " << c.n_head << "/" << c.n_head_kv << " head_dim " << c.head_dim << " prefix " << c.kv_pos0
                  << " rows " << c.n_tokens << " tree " << c.tree);
    Inputs in = make_inputs(c, g);
    std::vector<float> ref, serial, pooled;
    cpu::attention_ref(args_of(c, in, ref));
    cpu::attention(args_of(c, in, serial));
    cpu::attention(args_of(c, in, pooled), &pool);
    CHECK(worst_diff(ref, serial) < kSlack);
    CHECK(worst_diff(ref, pooled) < kSlack);
    bool all_written = true;
    for (float x : serial) all_written &= x != -7.0f;
    CHECK(all_written);
  }
}

TEST_CASE("attention: a row's output does not depend on the other rows of the batch", "[unit][kernels]") {
  // Row i of a 6-row tree batch against the same row attended alone (its visible batch slots
  // folded into the prefix is not the same layout, so compare against a batch where every other
  // row's query is different): the outputs of row i must be identical bit for bit.
  std::mt19937 g(5);
  cpu::ThreadPool pool(2);
  const Case c{8, 4, 40, 70, 6, true};
  Inputs in = make_inputs(c, g);
  std::vector<float> out1, out2;
  cpu::attention(args_of(c, in, out1), &pool);
  std::normal_distribution<float> nd;
  const int row = 3, row_floats = c.n_head * c.head_dim;
  for (int i = 0; i < c.n_tokens; ++i) {
    if (i == row) continue;
    for (int d = 0; d < row_floats; ++d) in.q[static_cast<size_t>(i * row_floats + d)] = nd(g);
  }
  cpu::attention(args_of(c, in, out2));  // serial this time: the split must not matter either
  for (int d = 0; d < row_floats; ++d) {
    CHECK(out1[static_cast<size_t>(row * row_floats + d)] == out2[static_cast<size_t>(row * row_floats + d)]);
  }
}

TEST_CASE("attention over f16 K/V rows: the twins agree, and equal f32 rows holding the same values", "[unit][kernels]") {
  // An f16 cache is read by widening each value exactly, then the f32 arithmetic: so the
  // kernel on f16 rows must give the bits the kernel gives on f32 rows that hold the rounded
  // values, and the AVX2 kernel must still match the scalar twin on f16 rows. (A wrong index or
  // a missed conversion is off by orders of magnitude more than the kSlack slack.)
  std::mt19937 g(20261203);
  cpu::ThreadPool pool(2);
  for (const Case& c : {Case{8, 4, 40, 0, 1, false}, Case{8, 4, 40, 3, 4, true}, Case{8, 4, 40, 255, 9, true},
                        Case{32, 8, 128, 61, 3, true}, Case{28, 4, 128, 37, 2, true}, Case{6, 2, 36, 50, 4, true},
                        Case{4, 1, 20, 9, 3, false}}) {
    INFO("heads " << c.n_head << "/" << c.n_head_kv << " head_dim " << c.head_dim << " prefix " << c.kv_pos0
                  << " rows " << c.n_tokens);
    Inputs in = make_inputs(c, g);
    std::vector<uint16_t> k16(in.k.size()), v16(in.v.size());
    for (size_t i = 0; i < in.k.size(); ++i) {
      k16[i] = cpu::f32_to_f16(in.k[i]);
      v16[i] = cpu::f32_to_f16(in.v[i]);
      in.k[i] = cpu::f16_to_f32(k16[i]);  // the f32 rows now hold the rounded values
      in.v[i] = cpu::f16_to_f32(v16[i]);
    }
    std::vector<float> f32_out, ref16, serial16, pooled16;
    cpu::attention(args_of(c, in, f32_out), &pool);
    auto half = [&](std::vector<float>& out) {
      cpu::AttentionArgs a = args_of(c, in, out);
      a.k_cache = nullptr;  // must not be read
      a.v_cache = nullptr;
      a.k_cache16 = k16.data();
      a.v_cache16 = v16.data();
      return a;
    };
    cpu::attention_ref(half(ref16));
    cpu::attention(half(serial16));
    cpu::attention(half(pooled16), &pool);
    CHECK(worst_diff(ref16, serial16) < kSlack);
    CHECK(worst_diff(serial16, pooled16) == 0.0);
    // Bit for bit where the AVX2 kernel runs (head_dim a multiple of 8); the scalar fallback
    // may contract its f32 and f16 loops differently (1-ulp scale).
    if (c.head_dim % 8 == 0) {
      CHECK(worst_diff(f32_out, pooled16) == 0.0);
    } else {
      CHECK(worst_diff(f32_out, pooled16) < kSlack);
    }
  }
}

TEST_CASE("attention: a NaN query gives NaN output on both twins, not zeros", "[unit][kernels]") {
  // Regression: exp of a NaN score returned 0 (the invisible-key branch), so the key was skipped
  // and a NaN query (a damaged attn_norm weight) produced a finite zero output: the model then
  // printed text instead of the engine's non_finite_logits error.
  std::mt19937 g(9);
  const Case c{4, 2, 40, 20, 3, false};
  Inputs in = make_inputs(c, g);
  in.q[5] = std::numeric_limits<float>::quiet_NaN();  // row 0, head 0
  std::vector<float> ref, simd;
  cpu::attention_ref(args_of(c, in, ref));
  cpu::attention(args_of(c, in, simd));
  for (int d = 0; d < c.head_dim; ++d) {
    INFO("dim " << d);
    CHECK(std::isnan(ref[static_cast<size_t>(d)]));
    CHECK(std::isnan(simd[static_cast<size_t>(d)]));
  }
  // Other heads and rows stay finite.
  const size_t other = static_cast<size_t>(c.n_head) * c.head_dim + 3;
  CHECK(std::isfinite(ref[other]));
  CHECK(std::isfinite(simd[other]));
}

TEST_CASE("attention: GQA heads summed in pairs skip each head's zero weights on their own", "[unit][kernels]") {
  // The AVX2 kernel sums V for two query heads of a KV head in one pass and skips a key per head
  // where its softmax weight is 0. The first head of each group gets a query 60 times larger, so
  // many of its weights underflow to 0 while the next head's do not (with a tree mask both are
  // 0 for the invisible keys): the paths where one head of the pair skips a key and the other
  // does not must give the reference's outputs for both.
  std::mt19937 g(31);
  cpu::ThreadPool pool(2);
  for (const Case& c : {Case{8, 4, 40, 90, 3, true}, Case{6, 2, 24, 33, 2, false}, Case{5, 1, 16, 40, 1, false}}) {
    INFO("heads " << c.n_head << "/" << c.n_head_kv << " head_dim " << c.head_dim);
    Inputs in = make_inputs(c, g);
    const int group = c.n_head / c.n_head_kv;
    for (int i = 0; i < c.n_tokens; ++i) {
      for (int h = 0; h < c.n_head; h += group) {
        for (int d = 0; d < c.head_dim; ++d) in.q[static_cast<size_t>((i * c.n_head + h) * c.head_dim + d)] *= 60.0f;
      }
    }
    // Row 0, head 0: some key's weight underflows (its score is more than 87 below the best).
    const int n_keys = c.kv_pos0 + c.n_tokens;
    std::vector<double> score(static_cast<size_t>(n_keys));
    for (int j = 0; j < n_keys; ++j) {
      double dot = 0;
      for (int d = 0; d < c.head_dim; ++d) {
        dot += static_cast<double>(in.q[static_cast<size_t>(d)]) * in.k[static_cast<size_t>(j * in.kv_stride + d)];
      }
      score[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(c.head_dim));
    }
    const double best = *std::max_element(score.begin(), score.end());
    int underflowed = 0;
    for (double sc : score) underflowed += sc - best < -100.0;
    REQUIRE(underflowed > 0);
    std::vector<float> ref, serial, pooled;
    cpu::attention_ref(args_of(c, in, ref));
    cpu::attention(args_of(c, in, serial));
    cpu::attention(args_of(c, in, pooled), &pool);
    CHECK(worst_diff(ref, serial) < kSlack);
    CHECK(worst_diff(ref, pooled) < kSlack);
  }
}
