// cpu::linear's integer path (linear_q8.h): the activation quantizer and the scalar twin that
// the SIMD variants (linear_q8_x86.cpp) are held to bit for bit, and the dispatch.
#include "kernels/cpu/linear_q8.h"

#include <algorithm>
#include <limits>
#include <cmath>
#include <stdexcept>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant.h"

namespace specchat::cpu::q8 {

#if defined(__x86_64__)
// linear_q8_x86.cpp
void quantize_avx2(const float* x, int r0, int r1, int n_in, Act& out);
void quantize_avx512(const float* x, int r0, int r1, int n_in, Act& out);
void rows_avx2(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr);
void rows_avx512(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr);
void quantize_k256_avx2(const float* x, int r0, int r1, int n_in, Act& out);
void quantize_k256_avx512(const float* x, int r0, int r1, int n_in, Act& out);
#endif

namespace {

// max_ps / min_ps semantics (the second operand when either is NaN), so the clamp and the
// rounding below are what the SIMD variants compute.
inline float clamp127(float v) {
  v = v > -127.0f ? v : -127.0f;
  v = v < 127.0f ? v : 127.0f;
  return v;
}

void quantize_generic(const float* x, int r0, int r1, int n_in, Act& out) {
  const int nb = n_in / kBlock;
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    for (int b = 0; b < nb; ++b) {
      float amax = 0.0f;
      bool nan = false;
      for (int i = 0; i < kBlock; ++i) {
        amax = std::max(amax, std::fabs(xr[kBlock * b + i]));
        nan = nan || std::isnan(xr[kBlock * b + i]);
      }
      const float d = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
      const float id = d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
      for (int i = 0; i < kBlock; ++i) {
        const float r = std::nearbyint(clamp127(xr[kBlock * b + i] * id));  // round half to even
        const int v = static_cast<int>(r);  // clamp127 maps NaN to -127: never out of range
        q[kBlock * b + i] = static_cast<int8_t>(v);
      }
      out.d[static_cast<size_t>(t) * nb + b] = d;
    }
  }
}

// Form::k256 / k256n: one d per 256 values (same rule as a 32-value block), stored in k256_pos
// order with a sum per 32 values (k256) or in natural order with a sum per 16 (k256n).
void quantize_k256_generic(const float* x, int r0, int r1, int n_in, Act& out) {
  const bool natural = out.form == Form::k256n;
  const int span = out.bsum_span();
  const int nS = n_in / 256;
  for (int t = r0; t < r1; ++t) {
    const float* xr = x + static_cast<int64_t>(t) * n_in;
    int8_t* q = out.q.data() + static_cast<int64_t>(t) * n_in;
    for (int S = 0; S < nS; ++S) {
      const float* p = xr + 256 * S;
      float amax = 0.0f;
      bool nan = false;
      for (int i = 0; i < 256; ++i) {
        amax = std::max(amax, std::fabs(p[i]));
        nan = nan || std::isnan(p[i]);
      }
      const float d = nan ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
      const float id = d >= std::numeric_limits<float>::min() ? 1.0f / d : 0.0f;
      for (int j = 0; j < 256 / span; ++j) {
        int sum = 0;
        for (int i = span * j; i < span * j + span; ++i) {
          const int v = static_cast<int>(std::nearbyint(clamp127(p[i] * id)));
          q[256 * S + (natural ? i : k256_pos(i))] = static_cast<int8_t>(v);
          sum += v;
        }
        out.bsum[static_cast<size_t>(t) * (n_in / span) + (256 / span) * S + j] = static_cast<int16_t>(sum);
      }
      out.d[static_cast<size_t>(t) * nS + S] = d;
    }
  }
}

// tiling::hsum's order.
inline float hsum8(const float* v) { return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])); }

// One 32-value group: F[e & 1][l] = fma(L[l], s[l], F[e & 1][l]).
inline void group(const int* w, const int8_t* a, const float* s, float* f) {
  for (int l = 0; l < 8; ++l) {
    int acc = 0;
    for (int i = 4 * l; i < 4 * l + 4; ++i) acc += w[i] * a[i];
    f[l] = std::fma(static_cast<float>(acc), s[l], f[l]);
  }
}

// q4_K / q5_K against Form::k256 activations, by linear_q8.h's 16-lane arithmetic.
float dot_k256_generic(const Act& a, int tk, const uint8_t* wrow, DType t) {
  const int8_t* aq = a.qrow(tk);
  const float* D = a.drow(tk);
  const int16_t* bs = a.brow(tk);
  float F[16] = {};
  for (int S = 0; S < a.n_in / 256; ++S) {
    const uint8_t *qs, *qh = nullptr, *scales;
    uint16_t d16, dmin16;
    if (t == DType::q4_k) {
      const auto* k = reinterpret_cast<const BlockQ4K*>(wrow) + S;
      qs = k->qs, scales = k->scales, d16 = k->d, dmin16 = k->dmin;
    } else {
      const auto* k = reinterpret_cast<const BlockQ5K*>(wrow) + S;
      qs = k->qs, qh = k->qh, scales = k->scales, d16 = k->d, dmin16 = k->dmin;
    }
    int32_t I[16] = {}, M[16] = {};
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) scale_min_k4(j, scales, &sc[j], &m[j]);
    for (int j = 0; j < 8; ++j) {
      const int grp = (j % 4) >= 2 ? 1 : 0;
      const int8_t* as = aq + 256 * S + k256_pos(32 * j);  // the sub-block's 32 values, in order
      for (int l = 0; l < 8; ++l) {
        int32_t s = 0;
        for (int i = 4 * l; i < 4 * l + 4; ++i) {
          int w = (qs[32 * (j / 2) + i] >> (4 * (j & 1))) & 0xF;
          if (qh) w |= ((qh[i] >> j) & 1) << 4;
          s += w * as[i];
        }
        I[8 * grp + l] += static_cast<int32_t>(sc[j]) * s;
      }
    }
    for (int l = 0; l < 4; ++l) {
      M[l] = static_cast<int32_t>(m[2 * l]) * bs[8 * S + 2 * l] + static_cast<int32_t>(m[2 * l + 1]) * bs[8 * S + 2 * l + 1];
    }
    const float dd = f16_to_f32(d16) * D[S], mm = -(f16_to_f32(dmin16) * D[S]);
    for (int l = 0; l < 16; ++l) F[l] = std::fma(static_cast<float>(I[l]), dd, F[l]);
    for (int l = 0; l < 16; ++l) F[l] = std::fma(static_cast<float>(M[l]), mm, F[l]);
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = F[l] + F[l + 8];
  return hsum8(v);
}

// q6_K against Form::k256n activations, by linear_q8.h's arithmetic.
float dot_q6k_generic(const Act& a, int tk, const uint8_t* wrow) {
  const int8_t* aq = a.qrow(tk);
  const float* D = a.drow(tk);
  const int16_t* bs = a.brow(tk);
  float F[16] = {};
  for (int S = 0; S < a.n_in / 256; ++S) {
    const auto* k = reinterpret_cast<const BlockQ6K*>(wrow) + S;
    int32_t I[16] = {};
    for (int gi = 0; gi < 8; ++gi) {  // values 32gi .. 32gi + 31: lanes 8 (gi mod 2) + i / 4
      const int h = gi / 4, g = gi % 4;
      const uint8_t* ql = k->ql + 64 * h + 32 * (g & 1);
      const uint8_t* qh = k->qh + 32 * h;
      const int8_t* as = aq + 256 * S + 32 * gi;
      for (int l = 0; l < 8; ++l) {
        int32_t s = 0;
        for (int i = 4 * l; i < 4 * l + 4; ++i) {
          const int q = (g >= 2 ? ql[i] >> 4 : ql[i] & 0xF) | (((qh[i] >> (2 * g)) & 3) << 4);
          s += q * as[i];
        }
        I[8 * (gi & 1) + l] += static_cast<int32_t>(k->scales[(32 * gi + 4 * l) / 16]) * s;
      }
    }
    int32_t m = 0;
    for (int sb = 0; sb < 16; ++sb) m += static_cast<int32_t>(k->scales[sb]) * bs[16 * S + sb];
    I[0] += -32 * m;
    const float dd = f16_to_f32(k->d) * D[S];
    for (int l = 0; l < 16; ++l) F[l] = std::fma(static_cast<float>(I[l]), dd, F[l]);
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = F[l] + F[l + 8];
  return hsum8(v);
}

// y = x_t · w_row by the arithmetic of linear_q8.h.
float dot_generic(const Act& a, int tk, const uint8_t* wrow, DType t) {
  if (form_for(t) == Form::k256) return dot_k256_generic(a, tk, wrow, t);
  if (form_for(t) == Form::k256n) return dot_q6k_generic(a, tk, wrow);
  const int8_t* aq = a.qrow(tk);
  const float* da = a.drow(tk);
  float F[2][8] = {};
  int w[32];
  float s[8];
  const int n_in = a.n_in;
  switch (t) {
    case DType::q8_0:
    case DType::q4_0:
      for (int b = 0; b < n_in / 32; ++b) {
        float dw;
        if (t == DType::q8_0) {
          const auto* k = reinterpret_cast<const BlockQ8_0*>(wrow) + b;
          for (int i = 0; i < 32; ++i) w[i] = k->qs[i];
          dw = f16_to_f32(k->d);
        } else {
          const auto* k = reinterpret_cast<const BlockQ4_0*>(wrow) + b;
          for (int i = 0; i < 16; ++i) {
            w[i] = (k->qs[i] & 0xF) - 8;
            w[i + 16] = (k->qs[i] >> 4) - 8;
          }
          dw = f16_to_f32(k->d);
        }
        std::fill(s, s + 8, dw * da[b]);
        group(w, aq + 32 * b, s, F[b & 1]);
      }
      break;
    default: throw std::invalid_argument("cpu::linear (q8 activations): not a block type");
  }
  float v[8];
  for (int l = 0; l < 8; ++l) v[l] = F[0][l] + F[1][l];
  return hsum8(v);
}

void rows_generic(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  const size_t row_bytes = dtype_row_bytes(t, static_cast<uint64_t>(a.n_in));
  for (int tk = 0; tk < a.n_rows; ++tk) {
    for (int r = 0; r < nr; ++r) {
      const uint8_t* wrow = static_cast<const uint8_t*>(w) + static_cast<size_t>(j0 + r) * row_bytes;
      y[static_cast<int64_t>(tk) * n_out + j0 + r] = dot_generic(a, tk, wrow, t);
    }
  }
}

}  // namespace

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::generic: return true;
    case Isa::avx2: return cpu_has_avx2_fma_f16c();
    case Isa::avx512: return cpu_has_avx512_vnni();
  }
  return false;
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::avx512) ? Isa::avx512 : isa_supported(Isa::avx2) ? Isa::avx2 : Isa::generic;
  return best;
}

void quantize(Isa isa, const float* x, int n_rows, int n_in, Act& out, ThreadPool* pool, Form form) {
  if (n_in % kBlock != 0) throw std::invalid_argument("cpu::linear (q8 activations): rows are not whole blocks of 32");
  if (form != Form::b32 && n_in % 256 != 0) {
    throw std::invalid_argument("cpu::linear (q8 activations): rows are not whole super-blocks of 256");
  }
  out.form = form;
  out.n_rows = n_rows;
  out.n_in = n_in;
  // Sized, never shrunk: the buffers are reused from call to call.
  const size_t nq = static_cast<size_t>(n_rows) * static_cast<size_t>(n_in), nb = nq / kBlock;
  if (out.q.size() < nq) out.q.resize(nq);
  if (form == Form::b32) {
    if (out.d.size() < nb) out.d.resize(nb);
  } else {
    if (out.d.size() < nq / 256) out.d.resize(nq / 256);
    if (out.bsum.size() < nq / out.bsum_span()) out.bsum.resize(nq / out.bsum_span());
  }
  auto run = [&](int r0, int r1) {
    if (form != Form::b32) {
#if defined(__x86_64__)
      if (isa == Isa::avx512) return quantize_k256_avx512(x, r0, r1, n_in, out);
      if (isa == Isa::avx2) return quantize_k256_avx2(x, r0, r1, n_in, out);
#endif
      return quantize_k256_generic(x, r0, r1, n_in, out);
    }
#if defined(__x86_64__)
    if (isa == Isa::avx512) return quantize_avx512(x, r0, r1, n_in, out);
    if (isa == Isa::avx2) return quantize_avx2(x, r0, r1, n_in, out);
#endif
    quantize_generic(x, r0, r1, n_in, out);
  };
  // A prefill's rows in parallel (each row's bytes do not depend on the split); a decode's
  // handful serially (waking the pool costs more).
  const int n_threads = pool ? pool->n_threads() : 1;
  if (n_threads <= 1 || static_cast<int64_t>(n_rows) * n_in < (1 << 16)) {
    run(0, n_rows);
    return;
  }
  const int n_chunks = std::min(n_rows, 4 * n_threads);
  parallel_for(pool, n_chunks, [&](int c) {
    run(static_cast<int>(static_cast<int64_t>(n_rows) * c / n_chunks),
        static_cast<int>(static_cast<int64_t>(n_rows) * (c + 1) / n_chunks));
  });
}

void rows(Isa isa, const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  if (a.form != form_for(t)) throw std::invalid_argument("cpu::linear (q8 activations): activations in the wrong form");
#if defined(__x86_64__)
  if (isa == Isa::avx512) return rows_avx512(a, w, t, y, n_out, j0, nr);
  if (isa == Isa::avx2) return rows_avx2(a, w, t, y, n_out, j0, nr);
#endif
  (void)isa;
  rows_generic(a, w, t, y, n_out, j0, nr);
}

}  // namespace specchat::cpu::q8
