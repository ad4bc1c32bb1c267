// The small element-wise ops of a forward, generic and AVX2 (contract: kernels/cpu/ops_simd.h).
// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): a product added to another value
// must stay two roundings in both copies, or the AVX2 copy would differ from its twin.
#include "kernels/cpu/ops_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cmath>
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"

namespace specchat::cpu::simd {

bool avx2_available() { return cpu_has_avx2_fma_f16c(); }

// ---------------------------------------------------------------------------------------------
// Generic twins.

namespace {

// 1 / sqrt(mean + eps) from the 16 lane sums, combined pairwise (lane j += lane j + w).
inline float rms_scale(double acc[16], int d, float eps) {
  for (int w = 8; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  }
  return static_cast<float>(1.0 / std::sqrt(acc[0] / d + eps));
}

}  // namespace

void rmsnorm_generic(const float* x, const float* weight, float* out, int n_tokens, int d, float eps) {
  for (int t = 0; t < n_tokens; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * d;
    float* o = out + static_cast<int64_t>(t) * d;
    // Sixteen partial sums in double (sum j takes the columns ≡ j mod 16), added pairwise in a
    // fixed order: the same bits on every ISA and at every batch size. One chain of d dependent
    // additions made this op 2.2 µs per call for 8 rows of 320 (bench --profile, 2026-12-05).
    double acc[16] = {};
    int i = 0;
    for (; i + 16 <= d; i += 16) {
      for (int j = 0; j < 16; ++j) acc[j] += static_cast<double>(xr[i + j]) * xr[i + j];
    }
    for (int j = 0; i + j < d; ++j) acc[j] += static_cast<double>(xr[i + j]) * xr[i + j];
    const float scale = rms_scale(acc, d, eps);
    for (int k = 0; k < d; ++k) o[k] = xr[k] * scale * weight[k];
  }
}

void add_inplace_generic(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

void rope_generic(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
                  const float* cos_tab, const float* sin_tab) {
  const int half = p.n_rot / 2;
  // Pair partner of dimension i: 2i/2i+1 (norm) or i/i+half (neox).
  const int stride = p.neox ? 1 : 2, step = p.neox ? half : 1;
  for (int t = 0; t < n_tokens; ++t) {
    const float* cs = cos_tab + static_cast<int64_t>(pos[t]) * half;
    const float* sn = sin_tab + static_cast<int64_t>(pos[t]) * half;
    for (int h = 0; h < n_head; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_head + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const float a = v[stride * i], b = v[stride * i + step];
        v[stride * i] = a * cs[i] - b * sn[i];
        v[stride * i + step] = a * sn[i] + b * cs[i];
      }
    }
  }
}

void f32_to_f16_generic(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void f16_to_f32_generic(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

// ---------------------------------------------------------------------------------------------
// AVX2 copies.

#if defined(__x86_64__)
#define SPECCHAT_AVX2 __attribute__((target("avx2,fma,f16c")))

SPECCHAT_AVX2 void rmsnorm_avx2(const float* x, const float* weight, float* out, int n_tokens, int d, float eps) {
  for (int t = 0; t < n_tokens; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * d;
    float* o = out + static_cast<int64_t>(t) * d;
    // Lanes 0-3, 4-7, 8-11, 12-15 of the twin's sixteen sums; a square of an f32 is exact in
    // double, so each lane's sequence of additions is the twin's.
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 16 <= d; i += 16) {
      const __m256 lo = _mm256_loadu_ps(xr + i), hi = _mm256_loadu_ps(xr + i + 8);
      const __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(lo));
      const __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(lo, 1));
      const __m256d d2 = _mm256_cvtps_pd(_mm256_castps256_ps128(hi));
      const __m256d d3 = _mm256_cvtps_pd(_mm256_extractf128_ps(hi, 1));
      a0 = _mm256_add_pd(a0, _mm256_mul_pd(d0, d0));
      a1 = _mm256_add_pd(a1, _mm256_mul_pd(d1, d1));
      a2 = _mm256_add_pd(a2, _mm256_mul_pd(d2, d2));
      a3 = _mm256_add_pd(a3, _mm256_mul_pd(d3, d3));
    }
    alignas(32) double acc[16];
    _mm256_store_pd(acc, a0);
    _mm256_store_pd(acc + 4, a1);
    _mm256_store_pd(acc + 8, a2);
    _mm256_store_pd(acc + 12, a3);
    for (int j = 0; i + j < d; ++j) acc[j] += static_cast<double>(xr[i + j]) * xr[i + j];
    const float scale = rms_scale(acc, d, eps);
    const __m256 vs = _mm256_set1_ps(scale);
    int k = 0;
    for (; k + 8 <= d; k += 8) {
      _mm256_storeu_ps(o + k, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + k), vs), _mm256_loadu_ps(weight + k)));
    }
    for (; k < d; ++k) o[k] = xr[k] * scale * weight[k];
  }
}

SPECCHAT_AVX2 void add_inplace_avx2(float* x, const float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

namespace {

// One head's pairs (2i, 2i+1), i < n_pairs, with cs2/sn2 the per-dimension tables
// (cs2[2i] = cs2[2i+1] = cos_i; sn2[2i] = −sin_i, sn2[2i+1] = sin_i):
//   v[2i]   = a·cos + b·(−sin) = a·cos − b·sin   (b·(−sin) is −(b·sin) exactly)
//   v[2i+1] = b·cos + a·sin    = a·sin + b·cos   (an addition commutes exactly)
// the twin's two roundings per product and one per sum.
SPECCHAT_AVX2 inline void rotate_adjacent(float* v, int n_rot, const float* cs2, const float* sn2) {
  int k = 0;
  for (; k + 8 <= n_rot; k += 8) {
    const __m256 x = _mm256_loadu_ps(v + k);
    const __m256 sw = _mm256_permute_ps(x, 0xB1);  // (b, a) in every pair
    _mm256_storeu_ps(v + k, _mm256_add_ps(_mm256_mul_ps(x, _mm256_loadu_ps(cs2 + k)),
                                          _mm256_mul_ps(sw, _mm256_loadu_ps(sn2 + k))));
  }
  if (k < n_rot) {  // the last 1-3 pairs through the same vector arithmetic, padded with zeros
    alignas(32) float t[8] = {}, c[8] = {}, s[8] = {};
    const int rest = n_rot - k;
    std::memcpy(t, v + k, static_cast<size_t>(rest) * sizeof(float));
    std::memcpy(c, cs2 + k, static_cast<size_t>(rest) * sizeof(float));
    std::memcpy(s, sn2 + k, static_cast<size_t>(rest) * sizeof(float));
    const __m256 x = _mm256_load_ps(t);
    _mm256_store_ps(t, _mm256_add_ps(_mm256_mul_ps(x, _mm256_load_ps(c)),
                                     _mm256_mul_ps(_mm256_permute_ps(x, 0xB1), _mm256_load_ps(s))));
    std::memcpy(v + k, t, static_cast<size_t>(rest) * sizeof(float));
  }
}

// One head's pairs (i, i + half), i < half (GPT-NeoX halves).
SPECCHAT_AVX2 inline void rotate_halves(float* v, int half, const float* cs, const float* sn) {
  int i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
    const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
    _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s)));
    _mm256_storeu_ps(v + half + i, _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c)));
  }
  for (; i < half; ++i) {
    const float a = v[i], b = v[half + i];
    v[i] = a * cs[i] - b * sn[i];
    v[half + i] = a * sn[i] + b * cs[i];
  }
}

}  // namespace

SPECCHAT_AVX2 void rope_avx2(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
                             const float* cos_tab, const float* sin_tab) {
  const int half = p.n_rot / 2;
  // Per-dimension tables of one position (adjacent pairs); heads of a few hundred dimensions at
  // most take the stack, longer ones the generic twin.
  constexpr int kMaxRot = 1024;
  if (!p.neox && 2 * half > kMaxRot) {
    rope_generic(x, pos, n_tokens, n_head, head_dim, p, cos_tab, sin_tab);
    return;
  }
  alignas(32) float cs2[kMaxRot], sn2[kMaxRot];
  for (int t = 0; t < n_tokens; ++t) {
    const float* cs = cos_tab + static_cast<int64_t>(pos[t]) * half;
    const float* sn = sin_tab + static_cast<int64_t>(pos[t]) * half;
    if (!p.neox) {
      for (int i = 0; i < half; ++i) {
        cs2[2 * i] = cs2[2 * i + 1] = cs[i];
        sn2[2 * i] = -sn[i];
        sn2[2 * i + 1] = sn[i];
      }
    }
    for (int h = 0; h < n_head; ++h) {
      float* v = x + (static_cast<int64_t>(t) * n_head + h) * head_dim;
      if (p.neox) {
        rotate_halves(v, half, cs, sn);
      } else {
        rotate_adjacent(v, 2 * half, cs2, sn2);  // an odd n_rot's last dimension passes through
      }
    }
  }
}

SPECCHAT_AVX2 void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

SPECCHAT_AVX2 void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

#undef SPECCHAT_AVX2
#else
// Not x86-64: avx2_available() is false and these are never called; they run the twins.
void rmsnorm_avx2(const float* x, const float* weight, float* out, int n_tokens, int d, float eps) {
  rmsnorm_generic(x, weight, out, n_tokens, d, eps);
}
void add_inplace_avx2(float* x, const float* y, int64_t n) { add_inplace_generic(x, y, n); }
void rope_avx2(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
               const float* cos_tab, const float* sin_tab) {
  rope_generic(x, pos, n_tokens, n_head, head_dim, p, cos_tab, sin_tab);
}
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) { f32_to_f16_generic(src, dst, n); }
void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) { f16_to_f32_generic(src, dst, n); }
#endif

}  // namespace specchat::cpu::simd
