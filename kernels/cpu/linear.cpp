#include "kernels/cpu/linear.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"

namespace specchat::cpu {

namespace {

constexpr int kRows = 4;    // weight rows per block
constexpr int kChunk = 256;  // columns per block: 4 × 256 f32 = 4 KiB of tile, stays in L1

// Portable widening of n weights starting at element `off` of a row.
void widen_generic(const void* w, DType t, int64_t off, float* dst, int n) {
  if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
  } else {
    convert_to_f32(static_cast<const uint16_t*>(w) + off, t, dst, n);
  }
}

// One block (rows j0 .. j0 + nr − 1 of W, nr <= 4) for every row of x, portable version.
void block_generic(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in, int n_out,
                   int j0, int nr) {
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    for (int r = 0; r < nr; ++r) widen_generic(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    for (int tk = 0; tk < n_tokens; ++tk) {
      const float* xr = x + static_cast<int64_t>(tk) * n_in + k0;
      for (int r = 0; r < nr; ++r) {
        float lanes[8] = {};
        const int kc8 = kc / 8 * 8;
        for (int i = 0; i < kc8; i += 8) {
          for (int l = 0; l < 8; ++l) lanes[l] += xr[i + l] * tile[r][i + l];
        }
        float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
        for (int i = kc8; i < kc; ++i) s += xr[i] * tile[r][i];
        float* out = y + static_cast<int64_t>(tk) * n_out + j0 + r;
        *out = k0 == 0 ? s : *out + s;
      }
    }
  }
}

#if defined(__x86_64__)
#define SPECCHAT_AVX2 __attribute__((target("avx2,fma,f16c")))

SPECCHAT_AVX2 inline float hsum(__m256 v) {
  // ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)): the generic path's order.
  const __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  const __m128 s4 = _mm_add_ps(lo, hi);                        // [0+4, 1+5, 2+6, 3+7]
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));     // [(0+4)+(2+6), (1+5)+(3+7)]
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

SPECCHAT_AVX2 void widen_avx2(const void* w, DType t, int64_t off, float* dst, int n) {
  if (t == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(w) + off, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(w) + off;
  const int n8 = n / 8 * 8;
  if (t == DType::f16) {
    for (int i = 0; i < n8; i += 8) {
      _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  } else {  // bf16: the upper half of an f32
    for (int i = 0; i < n8; i += 8) {
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
      _mm256_store_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
  }
  if (n8 < n) convert_to_f32(src + n8, t, dst + n8, n - n8);
}

SPECCHAT_AVX2 void block_avx2(const float* x, const void* w, DType t, float* y, int n_tokens, int n_in,
                              int n_out, int j0, int nr) {
  alignas(32) float tile[kRows][kChunk];
  for (int k0 = 0; k0 < n_in; k0 += kChunk) {
    const int kc = std::min(kChunk, n_in - k0);
    const int kc8 = kc / 8 * 8;
    for (int r = 0; r < nr; ++r) widen_avx2(w, t, static_cast<int64_t>(j0 + r) * n_in + k0, tile[r], kc);
    // A short block repeats its last row (computed, not stored) so the loop stays 4 wide.
    const float* w0 = tile[0];
    const float* w1 = tile[std::min(1, nr - 1)];
    const float* w2 = tile[std::min(2, nr - 1)];
    const float* w3 = tile[std::min(3, nr - 1)];
    auto store = [&](int tk, const float* s) {
      float* out = y + static_cast<int64_t>(tk) * n_out + j0;
      for (int r = 0; r < nr; ++r) out[r] = k0 == 0 ? s[r] : out[r] + s[r];
    };
    int tk = 0;
    for (; tk + 2 <= n_tokens; tk += 2) {
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      const float* xb = xa + n_in;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i), vb = _mm256_loadu_ps(xb + i);
        const __m256 u0 = _mm256_load_ps(w0 + i), u1 = _mm256_load_ps(w1 + i);
        const __m256 u2 = _mm256_load_ps(w2 + i), u3 = _mm256_load_ps(w3 + i);
        a0 = _mm256_fmadd_ps(va, u0, a0);
        a1 = _mm256_fmadd_ps(va, u1, a1);
        a2 = _mm256_fmadd_ps(va, u2, a2);
        a3 = _mm256_fmadd_ps(va, u3, a3);
        b0 = _mm256_fmadd_ps(vb, u0, b0);
        b1 = _mm256_fmadd_ps(vb, u1, b1);
        b2 = _mm256_fmadd_ps(vb, u2, b2);
        b3 = _mm256_fmadd_ps(vb, u3, b3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      float sb[4] = {hsum(b0), hsum(b1), hsum(b2), hsum(b3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
        sb[0] = std::fma(xb[i], w0[i], sb[0]);
        sb[1] = std::fma(xb[i], w1[i], sb[1]);
        sb[2] = std::fma(xb[i], w2[i], sb[2]);
        sb[3] = std::fma(xb[i], w3[i], sb[3]);
      }
      store(tk, sa);
      store(tk + 1, sb);
    }
    if (tk < n_tokens) {  // the odd last row: same operations per element as the pairs
      const float* xa = x + static_cast<int64_t>(tk) * n_in + k0;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < kc8; i += 8) {
        const __m256 va = _mm256_loadu_ps(xa + i);
        a0 = _mm256_fmadd_ps(va, _mm256_load_ps(w0 + i), a0);
        a1 = _mm256_fmadd_ps(va, _mm256_load_ps(w1 + i), a1);
        a2 = _mm256_fmadd_ps(va, _mm256_load_ps(w2 + i), a2);
        a3 = _mm256_fmadd_ps(va, _mm256_load_ps(w3 + i), a3);
      }
      float sa[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int i = kc8; i < kc; ++i) {
        sa[0] = std::fma(xa[i], w0[i], sa[0]);
        sa[1] = std::fma(xa[i], w1[i], sa[1]);
        sa[2] = std::fma(xa[i], w2[i], sa[2]);
        sa[3] = std::fma(xa[i], w3[i], sa[3]);
      }
      store(tk, sa);
    }
  }
}

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                         __builtin_cpu_supports("f16c");
  return ok;
}
#else
bool have_avx2() { return false; }
#endif

}  // namespace

const char* linear_isa() { return have_avx2() ? "avx2+fma+f16c" : "generic"; }

void linear(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out,
            ThreadPool* pool) {
  if (w_type == DType::f32) {
    matmul(x, static_cast<const float*>(w), y, n_tokens, n_in, n_out, pool);
    return;
  }
  if (n_tokens <= 0 || n_out <= 0) return;
  const int n_blocks = (n_out + kRows - 1) / kRows;
  const bool avx2 = have_avx2();
  auto run = [&](int b0, int b1) {
    for (int b = b0; b < b1; ++b) {
      const int j0 = b * kRows, nr = std::min(kRows, n_out - j0);
#if defined(__x86_64__)
      if (avx2) {
        block_avx2(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
        continue;
      }
#endif
      block_generic(x, w, w_type, y, n_tokens, n_in, n_out, j0, nr);
    }
  };
  // Threads only pay off when there is enough work to split (below ~64k multiply-adds a
  // region's wake-up costs more than it saves). Several chunks per thread, so a thread that
  // the OS deschedules holds up only its chunk.
  const int n_threads = pool ? pool->n_threads() : 1;
  if (n_threads <= 1 || static_cast<int64_t>(n_out) * n_in * n_tokens < (1 << 16)) {
    run(0, n_blocks);
    return;
  }
  const int n_chunks = std::min(n_blocks, 8 * n_threads);
  parallel_for(pool, n_chunks, [&](int c) {
    run(static_cast<int>(static_cast<int64_t>(n_blocks) * c / n_chunks),
        static_cast<int>(static_cast<int64_t>(n_blocks) * (c + 1) / n_chunks));
  });
}

void linear_ref(const float* x, const void* w, DType w_type, float* y, int n_tokens, int n_in, int n_out) {
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int j = 0; j < n_out; ++j) {
    widen_generic(w, w_type, static_cast<int64_t>(j) * n_in, row.data(), n_in);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<int64_t>(t) * n_in;
      double s = 0;
      for (int i = 0; i < n_in; ++i) s += static_cast<double>(xr[i]) * row[static_cast<size_t>(i)];
      y[static_cast<int64_t>(t) * n_out + j] = static_cast<float>(s);
    }
  }
}

}  // namespace specchat::cpu
