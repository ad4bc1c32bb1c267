// CPU attention over a KV cache with tree masks (contract: kernels/cpu/ops.h, AttentionArgs).
//
// Two kernels with the same arithmetic:
// - attention_ref: one (query row, head) at a time, plain loops (the scalar twin; any CPU, any
//   head_dim);
// - the AVX2/FMA kernel: one (query row, KV head) at a time, so the query heads that share a KV
//   head (GQA) read each K row once, and several keys and several 8-wide slices of the output
//   are in flight at once. The reference's inner loops are one long chain of dependent FMAs per
//   (row, head) (one key after another into the same register), which left the core idle most
//   of the time: at a 256-token prefix attention was 37 % of the bundled target's forward.
//
// The AVX2 kernel performs, for each (row, head, key) and each output element, the same
// floating-point operations in the same order as the reference's AVX2 build (8 partial sums per
// dot product reduced as ((a0+a4)+(a1+a5))+((a2+a6)+(a3+a7)); softmax with std::exp and a
// double sum; V summed in key order with FMAs), so the two agree to the bit on AVX2 machines
// and a row's result never depends on the other rows of the batch (batch invariance).
//
// Both read f32 or f16 K/V rows (AttentionArgs::k_cache16): an f16 value is widened to f32
// exactly (F16C in the AVX2 kernel, cpu::f16_to_f32 in the reference) before the same
// arithmetic, so the twins still agree to the bit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "kernels/cpu/attention_ref.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat::cpu {

namespace {

// exp(x) for the softmax's x = score − max ≤ 0, in single precision: Cody–Waite range reduction
// x = n·ln 2 + r, a degree-6 polynomial for e^r (Cephes' expf coefficients, relative error
// about 1e-7) and 2^n from the exponent bits; 0 below −87 (e^−87 ≈ 1.6e-38, and the V sums
// skip zero weights); NaN for NaN (a NaN score must reach the output, not vanish as a zero). Every step is one IEEE operation or an explicit FMA, so the AVX2 kernel's
// 8-wide copy (exp_neg8) gives the same bits.
inline float exp_neg(float x) {
  if (x != x) return x;              // NaN stays NaN: a damaged model must not look healthy
  if (!(x >= -87.0f)) return 0.0f;  // also −inf (an invisible key)
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693359375f, x);
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float r2 = r * r;
  const float y = std::fma(p, r2, r) + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// One (query row i, head h) of attention: scores over the visible keys, softmax (sum in double),
// then the weighted sum of V rows. `s` holds n_keys scores. The dot products use 8 partial
// sums (vectorised by the compiler for the AVX2 clone); their order is fixed, so a row's result
// does not depend on what else is in the batch.
// Element j of a K/V row as f32: f32 rows as they are, f16 rows widened exactly.
inline float kv_elem(const float* p, int64_t j) { return p[j]; }
inline float kv_elem(const uint16_t* p, int64_t j) { return f16_to_f32(p[j]); }

// T: the cache's element type (float or uint16_t = IEEE binary16), with k/v bases given.
template <typename T>
__attribute__((always_inline)) inline void attention_row_head_t(const AttentionArgs& a, const T* k_cache,
                                                                const T* v_cache, int i, int h, float* s) {
  const int group = a.n_head / a.n_head_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  const int n_keys = a.kv_pos0 + a.n_tokens;
  const int n_masked = n_keys - a.n_prefix;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const uint8_t* vis = a.visible + static_cast<int64_t>(i) * n_masked;
  const int hk = h / group;
  const int hd = a.head_dim, hd8 = hd / 8 * 8;
  const float* q = a.q + (static_cast<int64_t>(i) * a.n_head + h) * hd;
  float mx = neg_inf;
  for (int j = 0; j < n_keys; ++j) {
    if (j >= a.n_prefix && !vis[j - a.n_prefix]) {
      s[j] = neg_inf;
      continue;
    }
    const T* k = k_cache + j * a.kv_stride + static_cast<int64_t>(hk) * hd;
    float acc[8] = {};
    for (int d = 0; d < hd8; d += 8) {
      for (int l = 0; l < 8; ++l) acc[l] += q[d + l] * kv_elem(k, d + l);
    }
    float dot = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (int d = hd8; d < hd; ++d) dot += q[d] * kv_elem(k, d);
    s[j] = dot * scale;
    mx = std::max(mx, s[j]);
  }
  // Softmax weights; their sum in double, in 4 lanes (key j into lane j mod 4), combined as
  // (l0 + l1) + (l2 + l3): the order the AVX2 kernel's vector sum has.
  double lane[4] = {0, 0, 0, 0};
  for (int j = 0; j < n_keys; ++j) {
    s[j] = exp_neg(s[j] - mx);
    lane[j % 4] += s[j];
  }
  const float inv = static_cast<float>(1.0 / ((lane[0] + lane[1]) + (lane[2] + lane[3])));
  // o[d] = Σ_j p_j · v_j[d], summed in key order, 8 dimensions at a time in registers (the
  // same order as one running sum per dimension, without storing o for every key).
  float* o = a.out + (static_cast<int64_t>(i) * a.n_head + h) * hd;
  const T* v0 = v_cache + static_cast<int64_t>(hk) * hd;
  for (int d0 = 0; d0 < hd8; d0 += 8) {
    float acc[8] = {};
    for (int j = 0; j < n_keys; ++j) {
      if (s[j] == 0.0f) continue;
      const float p = s[j] * inv;
      const T* v = v0 + j * a.kv_stride + d0;
      for (int l = 0; l < 8; ++l) acc[l] += p * kv_elem(v, l);
    }
    for (int l = 0; l < 8; ++l) o[d0 + l] = acc[l];
  }
  for (int d = hd8; d < hd; ++d) {
    float acc = 0;
    for (int j = 0; j < n_keys; ++j) {
      if (s[j] == 0.0f) continue;
      acc += s[j] * inv * kv_elem(v0, j * a.kv_stride + d);
    }
    o[d] = acc;
  }
}

// The two element types, each cloned for AVX2 machines (target_clones does not apply to
// templates, so the body above is inlined into each).
__attribute__((target_clones("arch=x86-64-v3", "default")))
void attention_row_head_f32(const AttentionArgs& a, int i, int h, float* s) {
  attention_row_head_t<float>(a, a.k_cache, a.v_cache, i, h, s);
}

__attribute__((target_clones("arch=x86-64-v3", "default")))
void attention_row_head_f16(const AttentionArgs& a, int i, int h, float* s) {
  attention_row_head_t<uint16_t>(a, a.k_cache16, a.v_cache16, i, h, s);
}

void attention_row_head(const AttentionArgs& a, int i, int h, float* s) {
  if (a.k_cache16) {
    attention_row_head_f16(a, i, h, s);
  } else {
    attention_row_head_f32(a, i, h, s);
  }
}

// The AVX2 kernel's largest GQA group (query heads per KV head; multi-query models with up to
// 128 heads): larger groups take the reference.
constexpr int kMaxGroup = 128;

#if defined(__x86_64__)
#define SPECCHAT_AVX2 __attribute__((target("avx2,fma,f16c")))

// The reference's reduction of 8 partial sums, for 4 keys at once: lane k of the result is
// ((a0+a4)+(a1+a5))+((a2+a6)+(a3+a7)) of acc[k] (hadd adds neighbours in the same pairs).
SPECCHAT_AVX2 inline __m128 half_sum(__m256 v) {
  return _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // (a0+a4, a1+a5, a2+a6, a3+a7)
}

SPECCHAT_AVX2 inline __m128 reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m128 h01 = _mm_hadd_ps(half_sum(a0), half_sum(a1));  // (t0+t1, t2+t3) of keys 0, 1
  const __m128 h23 = _mm_hadd_ps(half_sum(a2), half_sum(a3));
  return _mm_hadd_ps(h01, h23);
}

// 8 consecutive K/V elements as f32 (f16 widened exactly by F16C).
SPECCHAT_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SPECCHAT_AVX2 inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Scores of GT query heads (q rows of `qs`, head_dim apart) against keys [j0, j1) of one KV
// head: s[g * stride + j] = (q_g · k_j) · scale. Four keys per pass, each with its own
// accumulator per head (independent FMA chains).
template <int GT, typename T>
SPECCHAT_AVX2 void scores_gt(const float* qs, const T* k0, int64_t kv_stride, int hd, int j0, int j1, float scale,
                             float* s, int64_t stride) {
  const int nc = hd / 8;
  int j = j0;
  for (; j + 4 <= j1; j += 4) {
    __m256 acc[4][GT];
    for (int u = 0; u < 4; ++u) {
      for (int g = 0; g < GT; ++g) acc[u][g] = _mm256_setzero_ps();
    }
    const T* kr[4] = {k0 + j * kv_stride, k0 + (j + 1) * kv_stride, k0 + (j + 2) * kv_stride,
                      k0 + (j + 3) * kv_stride};
    for (int c = 0; c < nc; ++c) {
      __m256 kv[4];
      for (int u = 0; u < 4; ++u) kv[u] = load8(kr[u] + c * 8);
      for (int g = 0; g < GT; ++g) {
        const __m256 qv = _mm256_loadu_ps(qs + g * hd + c * 8);
        for (int u = 0; u < 4; ++u) acc[u][g] = _mm256_fmadd_ps(qv, kv[u], acc[u][g]);
      }
    }
    for (int g = 0; g < GT; ++g) {
      const __m128 dots = reduce4(acc[0][g], acc[1][g], acc[2][g], acc[3][g]);
      _mm_storeu_ps(s + g * stride + j, _mm_mul_ps(dots, _mm_set1_ps(scale)));
    }
  }
  for (; j < j1; ++j) {  // the last 1-3 keys, one at a time (same arithmetic)
    __m256 acc[GT];
    for (int g = 0; g < GT; ++g) acc[g] = _mm256_setzero_ps();
    const T* kr = k0 + j * kv_stride;
    for (int c = 0; c < nc; ++c) {
      const __m256 kv = load8(kr + c * 8);
      for (int g = 0; g < GT; ++g) acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qs + g * hd + c * 8), kv, acc[g]);
    }
    for (int g = 0; g < GT; ++g) {
      const __m128 dots = reduce4(acc[g], acc[g], acc[g], acc[g]);
      s[g * stride + j] = _mm_cvtss_f32(dots) * scale;
    }
  }
}

// o[c * 8 …] = Σ_j (s[j] · inv) · v_j[c * 8 …] for CT slices of 8 dimensions, keys in order,
// zero weights skipped (invisible keys, and exp underflow, exactly as the reference).
template <int CT, typename T>
SPECCHAT_AVX2 void weighted_v(const float* s, float inv, const T* v0, int64_t kv_stride, int n_keys, float* o) {
  __m256 acc[CT];
  for (int c = 0; c < CT; ++c) acc[c] = _mm256_setzero_ps();
  for (int j = 0; j < n_keys; ++j) {
    if (s[j] == 0.0f) continue;
    const __m256 p = _mm256_set1_ps(s[j] * inv);
    const T* v = v0 + j * kv_stride;
    for (int c = 0; c < CT; ++c) acc[c] = _mm256_fmadd_ps(p, load8(v + c * 8), acc[c]);
  }
  for (int c = 0; c < CT; ++c) _mm256_storeu_ps(o + c * 8, acc[c]);
}

// weighted_v for two query heads of one KV head (GQA) or two rows: each V row is loaded once
// for both, and the 2 · CT accumulators give the core independent FMA chains (one head's CT
// chains of dependent FMAs left it waiting on latency). Per head, the same operations in the
// same order as weighted_v, so the same bits; a key is skipped per head where its weight is 0.
template <int CT, typename T>
SPECCHAT_AVX2 void weighted_v2(const float* s0, float inv0, const T* va, float* o0, const float* s1, float inv1,
                               const T* vb, float* o1, int64_t kv_stride, int n_keys) {
  __m256 a0[CT], a1[CT];
  for (int c = 0; c < CT; ++c) a0[c] = a1[c] = _mm256_setzero_ps();
  for (int j = 0; j < n_keys; ++j) {
    const bool z0 = s0[j] == 0.0f, z1 = s1[j] == 0.0f;
    const T* ra = va + j * kv_stride;
    const T* rb = vb + j * kv_stride;
    if (!z0 && !z1) {
      const __m256 p0 = _mm256_set1_ps(s0[j] * inv0), p1 = _mm256_set1_ps(s1[j] * inv1);
      if (ra == rb) {
        for (int c = 0; c < CT; ++c) {
          const __m256 x = load8(ra + c * 8);
          a0[c] = _mm256_fmadd_ps(p0, x, a0[c]);
          a1[c] = _mm256_fmadd_ps(p1, x, a1[c]);
        }
      } else {
        for (int c = 0; c < CT; ++c) {
          a0[c] = _mm256_fmadd_ps(p0, load8(ra + c * 8), a0[c]);
          a1[c] = _mm256_fmadd_ps(p1, load8(rb + c * 8), a1[c]);
        }
      }
    } else if (!z0) {
      const __m256 p0 = _mm256_set1_ps(s0[j] * inv0);
      for (int c = 0; c < CT; ++c) a0[c] = _mm256_fmadd_ps(p0, load8(ra + c * 8), a0[c]);
    } else if (!z1) {
      const __m256 p1 = _mm256_set1_ps(s1[j] * inv1);
      for (int c = 0; c < CT; ++c) a1[c] = _mm256_fmadd_ps(p1, load8(rb + c * 8), a1[c]);
    }
  }
  for (int c = 0; c < CT; ++c) {
    _mm256_storeu_ps(o0 + c * 8, a0[c]);
    _mm256_storeu_ps(o1 + c * 8, a1[c]);
  }
}

// exp_neg for 8 lanes: the same operations, lane by lane.
SPECCHAT_AVX2 inline __m256 exp_neg8(__m256 x) {
  const __m256 live = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);  // false for −inf, NaN
  const __m256 xs = _mm256_and_ps(live, x);  // dead lanes compute e^0, then are zeroed
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xs, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693359375f), xs);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  // Dead lanes are 0, except NaN ones, which stay NaN (as exp_neg).
  const __m256 nan = _mm256_and_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), x);
  return _mm256_or_ps(_mm256_and_ps(live, _mm256_mul_ps(y, _mm256_castsi256_ps(e))), nan);
}

// In place: s[j] = exp_neg(s[j] − max); returns 1 / Σ s[j] (double lanes j mod 4, as the
// reference).
SPECCHAT_AVX2 float softmax_weights(float* s, int n) {
  __m256 vmx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int j = 0;
  for (; j + 8 <= n; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(s + j));
  alignas(32) float m8[8];
  _mm256_store_ps(m8, vmx);
  float mx = m8[0];
  for (int l = 1; l < 8; ++l) mx = std::max(mx, m8[l]);
  for (; j < n; ++j) mx = std::max(mx, s[j]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256d acc = _mm256_setzero_pd();
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp_neg8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
    _mm256_storeu_ps(s + j, e);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lane[4];
  _mm256_store_pd(lane, acc);
  for (; j < n; ++j) {  // n − j < 8 keys left; j is a multiple of 8, so lane j mod 4 continues
    s[j] = exp_neg(s[j] - mx);
    lane[j % 4] += s[j];
  }
  return static_cast<float>(1.0 / ((lane[0] + lane[1]) + (lane[2] + lane[3])));
}

// One (query row i, KV head hk): every query head of the group. s: [group, n_keys] scratch.
// T: the cache's element type (float, or uint16_t = binary16), k_cache/v_cache its rows.
template <typename T>
SPECCHAT_AVX2 void attention_row_kvhead_t(const AttentionArgs& a, const T* k_cache, const T* v_cache, int i, int hk,
                                          float* s) {
  const int group = a.n_head / a.n_head_kv;
  const int hd = a.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int n_keys = a.kv_pos0 + a.n_tokens;
  const int n_masked = n_keys - a.n_prefix;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const uint8_t* vis = a.visible + static_cast<int64_t>(i) * n_masked;
  const T* k0 = k_cache + static_cast<int64_t>(hk) * hd;
  const T* v0 = v_cache + static_cast<int64_t>(hk) * hd;
  const int h0 = hk * group;
  const float* q = a.q + (static_cast<int64_t>(i) * a.n_head + h0) * hd;
  // 1. Scores of every key (invisible ones too: their values are overwritten with −inf), up to
  // four heads of the group per pass.
  for (int g0 = 0; g0 < group; g0 += 4) {
    const int gt = std::min(4, group - g0);
    const float* qs = q + static_cast<int64_t>(g0) * hd;
    float* sg = s + static_cast<int64_t>(g0) * n_keys;
    switch (gt) {
      case 1: scores_gt<1>(qs, k0, a.kv_stride, hd, 0, n_keys, scale, sg, n_keys); break;
      case 2: scores_gt<2>(qs, k0, a.kv_stride, hd, 0, n_keys, scale, sg, n_keys); break;
      case 3: scores_gt<3>(qs, k0, a.kv_stride, hd, 0, n_keys, scale, sg, n_keys); break;
      default: scores_gt<4>(qs, k0, a.kv_stride, hd, 0, n_keys, scale, sg, n_keys); break;
    }
  }
  // 2. Softmax weights as the reference's.
  float inv[kMaxGroup];
  for (int g = 0; g < group; ++g) {
    float* sg = s + static_cast<int64_t>(g) * n_keys;
    for (int j = a.n_prefix; j < n_keys; ++j) {
      if (!vis[j - a.n_prefix]) sg[j] = neg_inf;
    }
    inv[g] = softmax_weights(sg, n_keys);
  }
  // 3. The weighted sums of V rows: two heads per pass over the keys, up to 6 slices of 8
  // dimensions each (12 accumulators), then a last odd head alone, up to 8 slices per pass.
  int g = 0;
  for (; g + 2 <= group; g += 2) {
    const float* s0 = s + static_cast<int64_t>(g) * n_keys;
    const float* s1 = s0 + n_keys;
    float* o0 = a.out + (static_cast<int64_t>(i) * a.n_head + h0 + g) * hd;
    float* o1 = o0 + hd;
    for (int c0 = 0; c0 < hd / 8; c0 += 6) {
      const int ct = std::min(6, hd / 8 - c0);
      const T* vc = v0 + c0 * 8;
      switch (ct) {
        case 1: weighted_v2<1>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
        case 2: weighted_v2<2>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
        case 3: weighted_v2<3>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
        case 4: weighted_v2<4>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
        case 5: weighted_v2<5>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
        default: weighted_v2<6>(s0, inv[g], vc, o0 + c0 * 8, s1, inv[g + 1], vc, o1 + c0 * 8, a.kv_stride, n_keys); break;
      }
    }
  }
  for (; g < group; ++g) {
    const float* sg = s + static_cast<int64_t>(g) * n_keys;
    float* o = a.out + (static_cast<int64_t>(i) * a.n_head + h0 + g) * hd;
    for (int c0 = 0; c0 < hd / 8; c0 += 8) {
      const int ct = std::min(8, hd / 8 - c0);
      const T* vc = v0 + c0 * 8;
      float* oc = o + c0 * 8;
      switch (ct) {
        case 1: weighted_v<1>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 2: weighted_v<2>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 3: weighted_v<3>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 4: weighted_v<4>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 5: weighted_v<5>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 6: weighted_v<6>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        case 7: weighted_v<7>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
        default: weighted_v<8>(sg, inv[g], vc, a.kv_stride, n_keys, oc); break;
      }
    }
  }
}

SPECCHAT_AVX2 void attention_row_kvhead(const AttentionArgs& a, int i, int hk, float* s) {
  if (a.k_cache16) {
    attention_row_kvhead_t<uint16_t>(a, a.k_cache16, a.v_cache16, i, hk, s);
  } else {
    attention_row_kvhead_t<float>(a, a.k_cache, a.v_cache, i, hk, s);
  }
}
#endif

// The AVX2 kernel applies to every part: AVX2 + FMA and head_dim a multiple of 8.
bool simd_applies(std::span<const AttentionArgs> parts) {
#if defined(__x86_64__)
  if (!cpu_has_avx2_fma_f16c()) return false;
  for (const AttentionArgs& a : parts) {
    if (a.head_dim % 8 != 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0) return false;
    if (a.n_head / a.n_head_kv > kMaxGroup) return false;
  }
  return true;
#else
  (void)parts;
  return false;
#endif
}

}  // namespace

void attention_ref(const AttentionArgs& a) {
  std::vector<float> s(static_cast<size_t>(std::max(0, a.kv_pos0 + a.n_tokens)));
  for (int i = 0; i < a.n_tokens; ++i) {
    for (int h = 0; h < a.n_head; ++h) attention_row_head(a, i, h, s.data());
  }
}

void attention(const AttentionArgs& a, ThreadPool* pool) { attention_multi(&a, 1, pool); }

void attention_multi(const AttentionArgs* parts_ptr, int n_parts, ThreadPool* pool) {
  const std::span<const AttentionArgs> parts(parts_ptr, static_cast<size_t>(std::max(0, n_parts)));
  const bool simd = simd_applies(parts);
  // Global task t = (part, row, head), or (part, row, KV head) for the AVX2 kernel. Score
  // buffers: a part's scratch for the serial reference, otherwise one per thread, grown once.
  auto heads_of = [&](const AttentionArgs& a) { return simd ? a.n_head_kv : a.n_head; };
  int n_tasks = 0, max_keys = 0, max_group = 1;
  int64_t work = 0;
  for (const AttentionArgs& a : parts) {
    n_tasks += a.n_tokens * heads_of(a);
    max_keys = std::max(max_keys, a.kv_pos0 + a.n_tokens);
    if (a.n_head_kv > 0) max_group = std::max(max_group, a.n_head / a.n_head_kv);
    work += static_cast<int64_t>(a.n_tokens) * a.n_head * (a.kv_pos0 + a.n_tokens) * a.head_dim;
  }
  const int n_threads = pool ? pool->n_threads() : 1;
  const bool parallel = n_threads > 1 && work >= (1 << 15);
  auto run = [&](int t0, int t1) {
    thread_local std::vector<float> scores;
    size_t part = 0;
    int base = 0;  // first global task of `part`
    for (int t = t0; t < t1; ++t) {
      while (t >= base + parts[part].n_tokens * heads_of(parts[part])) {
        base += parts[part].n_tokens * heads_of(parts[part]);
        ++part;
      }
      const AttentionArgs& a = parts[part];
      const int per_row = heads_of(a);
#if defined(__x86_64__)
      if (simd) {
        const size_t need = static_cast<size_t>(max_group) * static_cast<size_t>(max_keys);
        if (scores.size() < need) scores.resize(need);
        // KV-head-major within a part: consecutive tasks are the rows of one KV head, so a
        // thread's chunk reads that head's K/V slice from memory once and from L1 for its
        // other rows (row-major order spread one slice over both threads' chunks).
        attention_row_kvhead(a, (t - base) % a.n_tokens, (t - base) / a.n_tokens, scores.data());
        continue;
      }
#endif
      float* s = a.scratch;
      if (!s || parallel) {
        if (scores.size() < static_cast<size_t>(max_keys)) scores.resize(static_cast<size_t>(max_keys));
        s = scores.data();
      }
      attention_row_head(a, (t - base) / per_row, (t - base) % per_row, s);
    }
  };
  if (!parallel) {
    run(0, n_tasks);
    return;
  }
  const int n_chunks = std::min(n_tasks, 4 * n_threads);
  parallel_for(pool, n_chunks, [&](int c) {
    run(static_cast<int>(static_cast<int64_t>(n_tasks) * c / n_chunks),
        static_cast<int>(static_cast<int64_t>(n_tasks) * (c + 1) / n_chunks));
  });
}

}  // namespace specchat::cpu
