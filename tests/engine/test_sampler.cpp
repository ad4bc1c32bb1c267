// process_logits (engine/sampler.cpp) against the original full-sort implementation, kept here
// as the oracle, on seeded random logits (ties included), and the reusable-buffer overload's
// promise not to allocate once warmed up.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"

using namespace specchat;

namespace {

// The original process_logits (full sort of the vocabulary unless top_k restricts), verbatim
// apart from its name: the behaviour the optimised one must keep.
Distribution reference_process_logits(std::span<const float> logits, const SamplingParams& p) {
  Distribution d;
  if (p.greedy()) {
    d.ids = {argmax(logits)};
    d.probs = {1.0};
    return d;
  }
  const int n = static_cast<int>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
           (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
  };
  int keep = n;
  if (p.top_k > 0 && p.top_k < n) {
    keep = p.top_k;
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  order.resize(static_cast<size_t>(keep));
  const double mx = logits[static_cast<size_t>(order[0])];
  std::vector<double> pr(order.size());
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    pr[i] = std::exp((logits[static_cast<size_t>(order[i])] - mx) / p.temperature);
    sum += pr[i];
  }
  for (double& x : pr) x /= sum;
  size_t cut = pr.size();
  if (p.top_p < 1.0f) {
    double acc = 0;
    for (size_t i = 0; i < pr.size(); ++i) {
      acc += pr[i];
      if (acc >= p.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (size_t i = 0; i < cut; ++i) kept += pr[i];
  d.ids.assign(order.begin(), order.begin() + static_cast<long>(cut));
  d.probs.resize(cut);
  for (size_t i = 0; i < cut; ++i) d.probs[i] = pr[i] / kept;
  return d;
}

enum class Shape {
  normal,     // N(0, 3): distinct values
  quantised,  // N(0, 3) rounded to 0.5: many exact ties, also around every cut
  peaked,     // N(0, 3) plus a few ids far above: an LLM-like head
  plateau,    // 300 ids share the maximum: ties across the 64 / 256 selection chunks
  flat,       // every logit equal
};

std::vector<float> make_logits(size_t n, uint64_t seed, Shape shape) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> l(n);
  for (float& x : l) x = nd(g);
  switch (shape) {
    case Shape::normal:
      break;
    case Shape::quantised:
      for (float& x : l) x = std::round(x * 2.0f) / 2.0f;
      break;
    case Shape::peaked:
      for (int i = 0; i < 12; ++i) l[g() % n] += 15.0f;
      break;
    case Shape::plateau:
      for (int i = 0; i < 300; ++i) l[g() % n] = 20.0f;
      break;
    case Shape::flat:
      std::fill(l.begin(), l.end(), 1.25f);
      break;
  }
  return l;
}

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::normal: return "normal";
    case Shape::quantised: return "quantised";
    case Shape::peaked: return "peaked";
    case Shape::plateau: return "plateau";
    case Shape::flat: return "flat";
  }
  return "?";
}

// Bit-identical to the original everywhere except top_p < 1 without a restricting top_k, where
// the softmax normaliser is summed in a different order (sampler.cpp, nucleus()).
bool expect_bit_exact(const SamplingParams& p, size_t n) {
  return p.greedy() || (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) || !(p.top_p < 1.0f);
}

// Compares without one Catch assertion per entry (the vocabularies are large).
void check_matches(std::span<const float> logits, const SamplingParams& p,
                   const std::string& what) {
  INFO(what << " T=" << p.temperature << " top_k=" << p.top_k << " top_p=" << p.top_p);
  const Distribution want = reference_process_logits(logits, p);
  const Distribution got = process_logits(logits, p);
  REQUIRE(got.ids.size() == want.ids.size());
  REQUIRE(got.probs.size() == got.ids.size());
  CHECK(got.ids == want.ids);
  double max_diff = 0, total = 0;
  size_t n_bits_differ = 0;
  for (size_t i = 0; i < got.probs.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(got.probs[i] - want.probs[i]));
    if (got.probs[i] != want.probs[i]) ++n_bits_differ;
    total += got.probs[i];
  }
  CHECK(max_diff <= 1e-12);
  CHECK(std::abs(total - 1.0) <= 1e-12);
  if (expect_bit_exact(p, logits.size())) CHECK(n_bits_differ == 0);
  // The overload with caller-held buffers gives the same (bit for bit) as the wrapper.
  Distribution again;
  SamplerScratch scratch;
  process_logits(logits, p, again, scratch);
  CHECK(again.ids == got.ids);
  CHECK(again.probs == got.probs);
}

constexpr float kTopPs[] = {1.0f, 0.9999999f, 0.999f, 0.95f, 0.9f, 0.5f, 0.1f, 1e-6f, 0.0f};
constexpr Shape kShapes[] = {Shape::normal, Shape::quantised, Shape::peaked, Shape::plateau,
                             Shape::flat};

}  // namespace

TEST_CASE("process_logits matches the full-sort reference: small vocabularies", "[unit][sampler]") {
  const float temps[] = {0.0f, 0.25f, 0.7f, 1.0f, 1.6f, 8.0f};
  uint64_t seed = 1;
  for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{100}, size_t{1000}}) {
    for (Shape shape : kShapes) {
      const std::vector<float> l = make_logits(n, seed++, shape);
      const int ks[] = {0, 1, 2, 5, 40, 62, 63, 64, 65, static_cast<int>(n / 16),
                        static_cast<int>(n / 16) + 1, static_cast<int>(n) - 1, static_cast<int>(n),
                        static_cast<int>(n) + 7, -3};
      for (float t : temps) {
        for (int k : ks) {
          for (float top_p : kTopPs) {
            SamplingParams p;
            p.temperature = t;
            p.top_k = k;
            p.top_p = top_p;
            check_matches(l, p, "n=" + std::to_string(n) + " " + shape_name(shape));
          }
        }
      }
    }
  }
}

TEST_CASE("process_logits matches the full-sort reference: n_vocab 32003", "[unit][sampler]") {
  const size_t n = 32003;
  uint64_t seed = 100;
  for (Shape shape : kShapes) {
    const std::vector<float> l = make_logits(n, seed++, shape);
    for (float t : {0.0f, 0.7f, 1.0f, 8.0f}) {
      for (int k : {0, 40, 2001, 32003}) {  // 2001 = n/16 + 1: the nth_element selection
        for (float top_p : {1.0f, 0.9999999f, 0.95f, 0.5f, 1e-6f}) {
          // The oracle's full sort dominates the run time: skip the combinations that repeat
          // a path already covered (greedy ignores k and top_p).
          if (t == 0.0f && (k != 0 || top_p != 1.0f)) continue;
          if (k == 2001 && top_p != 1.0f && top_p != 0.95f) continue;
          SamplingParams p;
          p.temperature = t;
          p.top_k = k;
          p.top_p = top_p;
          check_matches(l, p, std::string("n=32003 ") + shape_name(shape));
        }
      }
    }
  }
}

// Pure temperature sampling sorts every id by a radix sort on the logits' bits: signed zeros
// (equal, so ordered by id), subnormals, the largest finite values and runs of equal logits
// must come out in the reference's order.
TEST_CASE("process_logits: the pure-temperature sort orders signed zeros, subnormals and extremes as the reference", "[unit][sampler]") {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> special = {0.0f, -0.0f, tiny, -tiny, big, -big, 1.0f, -1.0f, 1e-38f, -1e-38f, 0.5f, 2.0f};
  std::mt19937 g(77);
  for (size_t n : {size_t{1}, size_t{2}, size_t{12}, size_t{100}, size_t{4096}, size_t{5000}}) {
    std::vector<float> l(n);
    for (size_t i = 0; i < n; ++i) l[i] = special[g() % special.size()];
    for (float t : {1.0f, 0.7f}) {
      SamplingParams p;
      p.temperature = t;
      check_matches(l, p, "special values, n=" + std::to_string(n));
    }
  }
}

TEST_CASE("process_logits: nucleus crossing every selection chunk, and a cut on an exact sum",
          "[unit][sampler]") {
  // All equal: every probability is exactly 1/n (the sum n is exact in any order), so the
  // running sum hits top_p = 0.5 exactly at n/2 and the cut is deterministic.
  const std::vector<float> flat(4096, -2.0f);
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  const Distribution d = process_logits(flat, p);
  REQUIRE(d.ids.size() == 2048);
  for (size_t i = 0; i < d.ids.size(); ++i) {
    REQUIRE(d.ids[i] == static_cast<int32_t>(i));  // ties by ascending id
    REQUIRE(d.probs[i] == 1.0 / 2048.0);
  }
  check_matches(flat, p, "flat 4096");
  // A wide nucleus: the prefix spans the 64, 256, 1024, ... chunks and the gather fallback.
  const std::vector<float> wide = make_logits(20000, 7, Shape::quantised);
  for (float top_p : {0.3f, 0.8f, 0.99f}) {
    p.temperature = 5.0f;
    p.top_p = top_p;
    check_matches(wide, p, "wide");
  }
}

TEST_CASE("process_logits into caller buffers allocates nothing once warmed up",
          "[unit][sampler]") {
  const size_t n = 32003;
  std::vector<std::vector<float>> rows;
  for (uint64_t s = 0; s < 4; ++s) rows.push_back(make_logits(n, 500 + s, kShapes[s % 5]));
  rows.push_back(make_logits(n, 600, Shape::flat));
  std::vector<SamplingParams> params;
  for (float t : {0.0f, 0.7f, 1.0f, 8.0f}) {
    for (int k : {0, 1, 40, 5000}) {
      for (float top_p : {1.0f, 0.95f, 0.5f}) {
        SamplingParams p;
        p.temperature = t;
        p.top_k = k;
        p.top_p = top_p;
        params.push_back(p);
      }
    }
  }
  Distribution out;
  SamplerScratch scratch;
  // Warm-up: one pass over every parameter set grows the buffers to the largest need (pure
  // temperature sampling holds the whole vocabulary).
  for (const SamplingParams& p : params) process_logits(rows[0], p, out, scratch);
  const int32_t* ids_data = out.ids.data();
  const double* probs_data = out.probs.data();
  const int32_t* order_data = scratch.order.data();
  const size_t ids_cap = out.ids.capacity(), probs_cap = out.probs.capacity();
  const size_t order_cap = scratch.order.capacity();
  CHECK(ids_cap >= n);
  CHECK(probs_cap >= n);
  size_t n_moved = 0;
  for (int round = 0; round < 2; ++round) {
    for (const std::vector<float>& l : rows) {
      for (const SamplingParams& p : params) {
        process_logits(l, p, out, scratch);
        if (out.ids.data() != ids_data || out.probs.data() != probs_data ||
            scratch.order.data() != order_data || out.ids.capacity() != ids_cap ||
            out.probs.capacity() != probs_cap || scratch.order.capacity() != order_cap) {
          ++n_moved;
        }
      }
    }
  }
  CHECK(n_moved == 0);
  // And the reused buffers still give the reference result.
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.9f;
  process_logits(rows[2], p, out, scratch);
  const Distribution want = reference_process_logits(rows[2], p);
  CHECK(out.ids == want.ids);
}

namespace {
// The original scalar argmax: first index of the largest value (NaN never wins unless at 0).
int32_t scalar_argmax(const std::vector<float>& x) {
  int32_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}
}  // namespace

TEST_CASE("argmax equals the scalar first-maximum scan: ties, every length, signed zeros, infinities, NaN", "[unit]") {
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {1, 2, 3, 15, 16, 17, 31, 32, 33, 47, 64, 100, 1000, 4099}) {
    for (int rep = 0; rep < 40; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = std::round(u(rng) * 2.0f) / 2.0f;  // coarse values: many ties
      const size_t at = static_cast<size_t>(rng() % static_cast<unsigned>(n));
      switch (rep % 8) {
        case 1: x[at] = 9.0f; x[static_cast<size_t>(n - 1)] = 9.0f; break;  // a tie with the last
        case 2: std::fill(x.begin(), x.end(), -inf); break;
        case 3: x[at] = inf; break;
        case 4: x[at] = nan; break;                  // NaN anywhere but 0 is skipped
        case 5: x[0] = nan; break;                   // NaN at 0 wins, as in the scan
        case 6: std::fill(x.begin(), x.end(), 0.0f); x[at] = -0.0f; break;  // +0 and -0 tie
        case 7: std::fill(x.begin(), x.end(), nan); x[at] = 1.0f; break;
        default: break;
      }
      INFO("n = " << n << ", case " << rep % 8);
      CHECK(argmax(x) == scalar_argmax(x));
    }
  }
}

TEST_CASE("all_finite is false exactly when some value is infinite or NaN, at any position", "[unit]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(all_finite(std::span<const float>()));
  for (int n : {1, 7, 16, 17, 33, 100, 4099}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) x[static_cast<size_t>(i)] = std::numeric_limits<float>::max() * (i % 2 ? 1.0f : -1.0f);
    INFO("n = " << n);
    CHECK(all_finite(x));  // the largest finite values: x - x is still 0
    for (int at : {0, n / 2, n - 1}) {
      for (float bad : {inf, -inf, nan}) {
        std::vector<float> y = x;
        y[static_cast<size_t>(at)] = bad;
        INFO("at " << at << " value " << bad);
        CHECK_FALSE(all_finite(y));
      }
    }
  }
}
