#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_simd.h"
#include "kernels/cpu/vec_exp.h"

#if SPECCHAT_HAVE_BLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <thread>
#include <vector>

namespace specchat::cpu {

void set_num_threads(int /*n*/) {
  // One pool does the decode-loop work: the engine's ThreadPool in cpu::linear / matmul_small.
  // BLAS (f32 prefill, big trees) runs single-threaded so its spinning workers never fight
  // that pool for the cores (TRAINING-NOTES: "thread pools fight").
#if SPECCHAT_HAVE_BLAS
  openblas_set_num_threads(1);
#endif
}

namespace {

// y[t, j] = x[t, :] · w[j, :] for up to 32 rows t (decode, drafting, verification). These are
// bound by the bandwidth of reading W: each block of 4 weight rows is read from memory once and
// reused from L1 for every token, so verifying k tokens costs far less than k decodes (BLAS
// sgemm first copies W into packed panels, which for a handful of rows costs more than the
// product). Blocks are split over the engine's thread pool. Cloned for x86-64-v3 (AVX2 + FMA) and
// baseline x86-64, chosen at run time by CPU features. Measured on the bundled target's output
// matrix (4096 x 320, 2 cores): 1 row 0.23 ms (OpenBLAS sgemv 0.27), 5 rows 0.37 ms (sgemm 0.80).
constexpr int kSmallBatch = 32;  // measured: past ~32 rows BLAS sgemm is faster
using v8 = float __attribute__((vector_size(32)));

// Vectors are loaded with memcpy (unaligned) inside the clones themselves: a helper function
// taking or returning v8 would cross an ABI boundary between the AVX2 and baseline clones.
#define SPECCHAT_LOAD8(dst, p) __builtin_memcpy(&(dst), (p), sizeof(v8))

__attribute__((target_clones("arch=x86-64-v3", "default")))
void matmul_small_blocks(const float* x, const float* w, float* y, int n_tokens, int n_in, int n_out, int jb0,
                         int jb1) {
  const int n8 = n_in / 8 * 8;
  for (int jb = jb0; jb < jb1; ++jb) {
    const int j = jb * 4;
    const float* w0 = w + static_cast<int64_t>(j) * n_in;
    const float* w1 = w0 + n_in;
    const float* w2 = w1 + n_in;
    const float* w3 = w2 + n_in;
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<int64_t>(t) * n_in;
      v8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
      for (int i = 0; i < n8; i += 8) {
        v8 xv, u0, u1, u2, u3;
        SPECCHAT_LOAD8(xv, xr + i);
        SPECCHAT_LOAD8(u0, w0 + i);
        SPECCHAT_LOAD8(u1, w1 + i);
        SPECCHAT_LOAD8(u2, w2 + i);
        SPECCHAT_LOAD8(u3, w3 + i);
        a0 += xv * u0;
        a1 += xv * u1;
        a2 += xv * u2;
        a3 += xv * u3;
      }
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int l = 0; l < 8; ++l) {
        s0 += a0[l];
        s1 += a1[l];
        s2 += a2[l];
        s3 += a3[l];
      }
      for (int i = n8; i < n_in; ++i) {
        s0 += xr[i] * w0[i];
        s1 += xr[i] * w1[i];
        s2 += xr[i] * w2[i];
        s3 += xr[i] * w3[i];
      }
      float* yr = y + static_cast<int64_t>(t) * n_out + j;
      yr[0] = s0;
      yr[1] = s1;
      yr[2] = s2;
      yr[3] = s3;
    }
  }
}

void matmul_small(const float* x, const float* w, float* y, int n_tokens, int n_in, int n_out, ThreadPool* pool) {
  const int n_blocks = n_out / 4;
  const int n_threads = pool ? pool->n_threads() : 1;
  if (n_threads <= 1 || static_cast<int64_t>(n_out) * n_in * n_tokens < (1 << 16)) {
    matmul_small_blocks(x, w, y, n_tokens, n_in, n_out, 0, n_blocks);
  } else {
    const int n_chunks = std::max(1, std::min(n_blocks, 8 * n_threads));
    parallel_for(pool, n_chunks, [&](int c) {
      matmul_small_blocks(x, w, y, n_tokens, n_in, n_out, static_cast<int>(static_cast<int64_t>(n_blocks) * c / n_chunks),
                          static_cast<int>(static_cast<int64_t>(n_blocks) * (c + 1) / n_chunks));
    });
  }
  for (int j = n_blocks * 4; j < n_out; ++j) {
    const float* wr = w + static_cast<int64_t>(j) * n_in;
    for (int t = 0; t < n_tokens; ++t) {
      const float* xr = x + static_cast<int64_t>(t) * n_in;
      float s = 0;
      for (int i = 0; i < n_in; ++i) s += xr[i] * wr[i];
      y[static_cast<int64_t>(t) * n_out + j] = s;
    }
  }
}

}  // namespace

void matmul(const float* x, const float* w, float* y, int n_tokens, int n_in, int n_out, ThreadPool* pool) {
#if SPECCHAT_HAVE_BLAS
  if (n_tokens <= kSmallBatch) {
    matmul_small(x, w, y, n_tokens, n_in, n_out, pool);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_tokens, n_out, n_in, 1.0f, x, n_in,
                w, n_in, 0.0f, y, n_out);
  }
#else
  // Built without OpenBLAS (SPECCHAT_BLAS=OFF): the small-batch kernel, 32 rows at a time, so
  // each weight block is still reused across a chunk of rows from L1.
  for (int t0 = 0; t0 < n_tokens; t0 += kSmallBatch) {
    const int nt = std::min(kSmallBatch, n_tokens - t0);
    matmul_small(x + static_cast<int64_t>(t0) * n_in, w, y + static_cast<int64_t>(t0) * n_out, nt,
                 n_in, n_out, pool);
  }
#endif
}

void rmsnorm(const float* x, const float* weight, float* out, int n_tokens, int d, float eps) {
  // The AVX2 copy gives the twin's bits (kernels/cpu/ops_simd.h).
  if (simd::avx2_available()) {
    simd::rmsnorm_avx2(x, weight, out, n_tokens, d, eps);
  } else {
    simd::rmsnorm_generic(x, weight, out, n_tokens, d, eps);
  }
}

namespace {

// Rotates the adjacent pairs (2i, 2i+1) of every head of one token by the angles whose cos/sin
// are cs/sn [head_dim / 2]: the one rotation rope() and rope_with_table() share.
void rotate_heads(float* x, int n_head, int head_dim, const float* cs, const float* sn) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_head; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * cs[i] - b * sn[i];
      v[2 * i + 1] = a * sn[i] + b * cs[i];
    }
  }
}

}  // namespace

void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, float theta) {
  const int half = head_dim / 2;
  std::vector<float> cs(half), sn(half);
  for (int t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < half; ++i) {
      // Angle computed in double, as the training framework's table, then rounded.
      const double inv = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      const double ang = static_cast<double>(pos[t]) * inv;
      cs[i] = static_cast<float>(std::cos(ang));
      sn[i] = static_cast<float>(std::sin(ang));
    }
    rotate_heads(x + static_cast<int64_t>(t) * n_head * head_dim, n_head, head_dim, cs.data(), sn.data());
  }
}

void rope_table(int n_pos, int head_dim, float theta, float* cos_out, float* sin_out) {
  const int half = head_dim / 2;
  for (int p = 0; p < n_pos; ++p) {
    for (int i = 0; i < half; ++i) {
      // The same expression as rope(): angle in double, then rounded.
      const double inv = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
      const double ang = static_cast<double>(p) * inv;
      cos_out[static_cast<int64_t>(p) * half + i] = static_cast<float>(std::cos(ang));
      sin_out[static_cast<int64_t>(p) * half + i] = static_cast<float>(std::sin(ang));
    }
  }
}

void rope_with_table(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const float* cos_tab,
                     const float* sin_tab) {
  RopeParams p;
  p.n_rot = head_dim;
  rope_with_table(x, pos, n_tokens, n_head, head_dim, p, cos_tab, sin_tab);
}

void rope_table(int n_pos, const RopeParams& p, float* cos_out, float* sin_out) {
  const int half = p.n_rot / 2;
  for (int pos = 0; pos < n_pos; ++pos) {
    for (int i = 0; i < half; ++i) {
      // rope_table()'s expression, then the factor and the scale (each exact for 1).
      const double inv = std::pow(static_cast<double>(p.theta), -2.0 * i / p.n_rot);
      double ang = static_cast<double>(pos) * inv;
      if (p.freq_factors) ang /= static_cast<double>(p.freq_factors[i]);
      ang *= static_cast<double>(p.freq_scale);
      cos_out[static_cast<int64_t>(pos) * half + i] = static_cast<float>(std::cos(ang));
      sin_out[static_cast<int64_t>(pos) * half + i] = static_cast<float>(std::sin(ang));
    }
  }
}

void rope_with_table(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, const RopeParams& p,
                     const float* cos_tab, const float* sin_tab) {
  // The AVX2 copy gives the twin's bits (kernels/cpu/ops_simd.h).
  if (simd::avx2_available()) {
    simd::rope_avx2(x, pos, n_tokens, n_head, head_dim, p, cos_tab, sin_tab);
  } else {
    simd::rope_generic(x, pos, n_tokens, n_head, head_dim, p, cos_tab, sin_tab);
  }
}

namespace {

using v16f = float __attribute__((vector_size(64)));

}  // namespace

// SiLU(g) * up over 16 lanes: g / (1 + e^-g) * up with SPECCHAT_EXP16 (vec_exp.h; its clamp
// to [-87, 88] keeps e^-g normal and finite, so the division needs no special case). A macro,
// not a function: generic vectors must not cross the clones' ABIs.
#define SPECCHAT_SWIGLU16(G, U, OUT)       \
  do {                                    \
    const v16f g_ = (G);                  \
    v16f e_;                              \
    SPECCHAT_EXP16(-g_, e_);              \
    (OUT) = g_ / (1.0f + e_) * (U);       \
  } while (0)

// Cloned per ISA (x86-64-v4: one 16-lane vector, v3: two of 8, baseline: four of 4): where
// std::exp was one libm call per element (2.6 ns: the bundled target's 864-wide rows took
// 2.2 µs each). Every element goes through the same 16-lane code (a short tail through a
// padded copy), so its result does not depend on its index or on n (batch invariance).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // out may be gate (in place): read, then write, 16 at a time
    v16f g, u, o;
    __builtin_memcpy(&g, gate + i, sizeof g);
    __builtin_memcpy(&u, up + i, sizeof u);
    SPECCHAT_SWIGLU16(g, u, o);
    __builtin_memcpy(out + i, &o, sizeof o);
  }
  if (i < n) {
    const size_t rest = static_cast<size_t>(n - i);
    v16f g{}, u{}, o;
    __builtin_memcpy(&g, gate + i, rest * sizeof(float));
    __builtin_memcpy(&u, up + i, rest * sizeof(float));
    SPECCHAT_SWIGLU16(g, u, o);
    __builtin_memcpy(out + i, &o, rest * sizeof(float));
  }
}
#undef SPECCHAT_SWIGLU16

void add_inplace(float* x, const float* y, int64_t n) {
  if (simd::avx2_available()) {
    simd::add_inplace_avx2(x, y, n);
  } else {
    simd::add_inplace_generic(x, y, n);
  }
}

void softmax_rows(float* x, int n_rows, int n) {
  for (int r = 0; r < n_rows; ++r) {
    float* row = x + static_cast<int64_t>(r) * n;
    float mx = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < n; ++i) mx = std::max(mx, row[i]);
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      row[i] = std::exp(row[i] - mx);
      sum += row[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int i = 0; i < n; ++i) row[i] *= inv;
  }
}

}  // namespace specchat::cpu
