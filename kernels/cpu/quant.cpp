#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"

namespace specchat::cpu {

namespace {

void check_n(DType t, int64_t n, const char* what) {
  if (n < 0 || n % dtype_block_size(t) != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(n) + " values of " + dtype_name(t) +
                                " are not whole blocks of " + std::to_string(dtype_block_size(t)));
  }
}

void deq_q8_0(const BlockQ8_0* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(b->qs[i]);
}

void deq_q4_0(const BlockQ4_0* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int i = 0; i < 16; ++i) {
    y[i] = d * static_cast<float>((b->qs[i] & 0xF) - 8);
    y[i + 16] = d * static_cast<float>((b->qs[i] >> 4) - 8);
  }
}

void deq_q4k(const BlockQ4K* b, float* y) {
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    scale_min_k4(s, b->scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    const uint8_t* q = b->qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = std::fma(d1, static_cast<float>((q[l] >> shift) & 0xF), -m1);
  }
}

void deq_q5k(const BlockQ5K* b, float* y) {
  const float d = f16_to_f32(b->d), dmin = f16_to_f32(b->dmin);
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    scale_min_k4(s, b->scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    const uint8_t* q = b->qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) {
      const int v = ((q[l] >> shift) & 0xF) | (((b->qh[l] >> s) & 1) << 4);
      y[32 * s + l] = std::fma(d1, static_cast<float>(v), -m1);
    }
  }
}

void deq_q6k(const BlockQ6K* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b->ql + 64 * h;
    const uint8_t* qh = b->qh + 32 * h;
    float* yh = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q[4] = {(ql[l] & 0xF) | ((qh[l] & 3) << 4), (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4),
                        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
      for (int k = 0; k < 4; ++k) {
        const int e = 32 * k + l;  // value index within the half
        const float ds = d * static_cast<float>(b->scales[8 * h + e / 16]);
        yh[e] = ds * static_cast<float>(q[k] - 32);
      }
    }
  }
}

// Fits x ≈ s·q − m (q integer in [0, nmax], m >= 0) to n values by alternating rounding and
// least squares; returns the best (s, m) seen. All-equal input gives s = 0.
void fit_scale_min(const float* x, int n, int nmax, float* s_out, float* m_out) {
  float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  lo = std::min(lo, 0.0f);
  float m = -lo, s = (hi - lo) / static_cast<float>(nmax);
  if (s <= 0) {
    *s_out = 0;
    *m_out = m;
    return;
  }
  auto err_of = [&](float sv, float mv) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const float q = std::clamp(std::nearbyint((x[i] + mv) / sv), 0.0f, static_cast<float>(nmax));
      const double r = static_cast<double>(sv) * q - mv - x[i];
      e += r * r;
    }
    return e;
  };
  float best_s = s, best_m = m;
  double best = err_of(s, m);
  for (int it = 0; it < 4; ++it) {
    double A = 0, B = 0, C = 0, D = 0;
    for (int i = 0; i < n; ++i) {
      const double q = std::clamp(std::nearbyint((x[i] + m) / s), 0.0f, static_cast<float>(nmax));
      A += q * q;
      B += q;
      C += q * x[i];
      D += x[i];
    }
    const double det = A * n - B * B;
    if (det <= 0) break;
    double ns = (C * n - B * D) / det, nm = (ns * B - D) / n;
    if (nm < 0) {  // the min would be positive: fit the scale alone with m = 0
      nm = 0;
      ns = A > 0 ? C / A : 0;
    }
    if (ns <= 0) break;
    s = static_cast<float>(ns);
    m = static_cast<float>(nm);
    const double e = err_of(s, m);
    if (e < best) {
      best = e;
      best_s = s;
      best_m = m;
    }
  }
  *s_out = best_s;
  *m_out = best_m;
}

// Fits x ≈ s·q (q integer in [−32, 31]) to n values; s may be negative (the largest magnitude
// maps to −32, the end of the range with one more step).
float fit_scale_signed(const float* x, int n) {
  float vmax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
  }
  if (vmax == 0) return 0;
  float s = vmax / -32.0f;
  auto q_of = [](float v, float sv) { return std::clamp(std::nearbyint(v / sv), -32.0f, 31.0f); };
  auto err_of = [&](float sv) {
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const double r = static_cast<double>(sv) * q_of(x[i], sv) - x[i];
      e += r * r;
    }
    return e;
  };
  float best_s = s;
  double best = err_of(s);
  for (int it = 0; it < 3; ++it) {
    double qq = 0, qx = 0;
    for (int i = 0; i < n; ++i) {
      const double q = q_of(x[i], s);
      qq += q * q;
      qx += q * x[i];
    }
    if (qq <= 0) break;
    s = static_cast<float>(qx / qq);
    if (s == 0) break;
    const double e = err_of(s);
    if (e < best) {
      best = e;
      best_s = s;
    }
  }
  return best_s;
}

// The f16 nearest to v, and its value.
uint16_t to_f16(float v, float* back) {
  const uint16_t h = f32_to_f16(v);
  *back = f16_to_f32(h);
  return h;
}

void quant_q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  float d;
  b->d = to_f16(amax / 127.0f, &d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) b->qs[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * id), -127.0f, 127.0f));
}

void quant_q4_0(const float* x, BlockQ4_0* b) {
  float vmax = 0;
  for (int i = 0; i < 32; ++i) {
    if (std::fabs(x[i]) > std::fabs(vmax)) vmax = x[i];
  }
  float d;
  b->d = to_f16(vmax / -8.0f, &d);
  const float id = d != 0 ? 1.0f / d : 0.0f;
  auto q = [&](float v) { return static_cast<uint8_t>(std::clamp(std::nearbyint(v * id) + 8.0f, 0.0f, 15.0f)); };
  for (int i = 0; i < 16; ++i) b->qs[i] = static_cast<uint8_t>(q(x[i]) | (q(x[i + 16]) << 4));
}

// The shared part of q4_K and q5_K: fits the 8 sub-blocks, packs d, dmin and the 6-bit scales
// and mins, and returns the quants q[256] in [0, nmax].
template <typename Block>
void quant_k_scales(const float* x, Block* b, int nmax, uint8_t* q) {
  float s[8], m[8];
  for (int j = 0; j < 8; ++j) fit_scale_min(x + 32 * j, 32, nmax, &s[j], &m[j]);
  const float smax = *std::max_element(s, s + 8), mmax = *std::max_element(m, m + 8);
  float d, dmin;
  b->d = to_f16(smax / 63.0f, &d);
  b->dmin = to_f16(mmax / 63.0f, &dmin);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? static_cast<uint8_t>(std::clamp(std::nearbyint(s[j] / d), 0.0f, 63.0f)) : 0;
    mn[j] = dmin > 0 ? static_cast<uint8_t>(std::clamp(std::nearbyint(m[j] / dmin), 0.0f, 63.0f)) : 0;
  }
  std::memset(b->scales, 0, sizeof(b->scales));
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      b->scales[j] = sc[j];
      b->scales[j + 4] = mn[j];
    } else {
      b->scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((mn[j] & 0xF) << 4));
      b->scales[j - 4] = static_cast<uint8_t>(b->scales[j - 4] | ((sc[j] >> 4) << 6));
      b->scales[j] = static_cast<uint8_t>(b->scales[j] | ((mn[j] >> 4) << 6));
    }
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t scj, mj;
    scale_min_k4(j, b->scales, &scj, &mj);
    const float d1 = d * static_cast<float>(scj), m1 = dmin * static_cast<float>(mj);
    for (int l = 0; l < 32; ++l) {
      const float v = d1 > 0 ? std::nearbyint((x[32 * j + l] + m1) / d1) : 0.0f;
      q[32 * j + l] = static_cast<uint8_t>(std::clamp(v, 0.0f, static_cast<float>(nmax)));
    }
  }
}

void quant_q4k(const float* x, BlockQ4K* b) {
  uint8_t q[256];
  quant_k_scales(x, b, 15, q);
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) b->qs[32 * g + l] = static_cast<uint8_t>(q[64 * g + l] | (q[64 * g + 32 + l] << 4));
  }
}

void quant_q5k(const float* x, BlockQ5K* b) {
  uint8_t q[256];
  quant_k_scales(x, b, 31, q);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int g = 0; g < 4; ++g) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = q[64 * g + l], hi = q[64 * g + 32 + l];
      b->qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b->qh[l] = static_cast<uint8_t>(b->qh[l] | ((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
    }
  }
}

void quant_q6k(const float* x, BlockQ6K* b) {
  float s[16];
  float amax = 0;
  for (int j = 0; j < 16; ++j) {
    s[j] = fit_scale_signed(x + 16 * j, 16);
    amax = std::max(amax, std::fabs(s[j]));
  }
  float d;
  b->d = to_f16(amax / 127.0f, &d);
  for (int j = 0; j < 16; ++j) {
    b->scales[j] = d > 0 ? static_cast<int8_t>(std::clamp(std::nearbyint(s[j] / d), -127.0f, 127.0f)) : 0;
  }
  uint8_t q[256];
  for (int e = 0; e < 256; ++e) {
    const float ds = d * static_cast<float>(b->scales[e / 16]);
    const float v = ds != 0 ? std::clamp(std::nearbyint(x[e] / ds), -32.0f, 31.0f) : 0.0f;
    q[e] = static_cast<uint8_t>(static_cast<int>(v) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qh0 = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = qh0[l], q2 = qh0[l + 32], q3 = qh0[l + 64], q4 = qh0[l + 96];
      b->ql[64 * h + l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      b->ql[64 * h + 32 + l] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      b->qh[32 * h + l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

}  // namespace

void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n) {
  if (!dtype_is_block(t)) {
    if (t == DType::f32) {
      if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    } else {
      convert_to_f32(src, t, dst, n);
    }
    return;
  }
  check_n(t, n, "dequantize_row_ref");
  const int64_t nb = n / dtype_block_size(t), bs = dtype_block_size(t);
  const auto* p = static_cast<const uint8_t*>(src);
  const size_t bb = dtype_block_bytes(t);
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* blk = p + static_cast<size_t>(i) * bb;
    float* y = dst + i * bs;
    switch (t) {
      case DType::q8_0: deq_q8_0(reinterpret_cast<const BlockQ8_0*>(blk), y); break;
      case DType::q4_0: deq_q4_0(reinterpret_cast<const BlockQ4_0*>(blk), y); break;
      case DType::q4_k: deq_q4k(reinterpret_cast<const BlockQ4K*>(blk), y); break;
      case DType::q5_k: deq_q5k(reinterpret_cast<const BlockQ5K*>(blk), y); break;
      case DType::q6_k: deq_q6k(reinterpret_cast<const BlockQ6K*>(blk), y); break;
      default: break;
    }
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  if (!dtype_is_block(t)) throw std::invalid_argument(std::string("quantize_row: ") + dtype_name(t) + " is not a block type");
  check_n(t, n, "quantize_row");
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(src[i])) throw std::invalid_argument("quantize_row: value " + std::to_string(i) + " is not finite");
  }
  const int64_t nb = n / dtype_block_size(t), bs = dtype_block_size(t);
  auto* p = static_cast<uint8_t*>(dst);
  const size_t bb = dtype_block_bytes(t);
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* blk = p + static_cast<size_t>(i) * bb;
    const float* x = src + i * bs;
    switch (t) {
      case DType::q8_0: quant_q8_0(x, reinterpret_cast<BlockQ8_0*>(blk)); break;
      case DType::q4_0: quant_q4_0(x, reinterpret_cast<BlockQ4_0*>(blk)); break;
      case DType::q4_k: quant_q4k(x, reinterpret_cast<BlockQ4K*>(blk)); break;
      case DType::q5_k: quant_q5k(x, reinterpret_cast<BlockQ5K*>(blk)); break;
      case DType::q6_k: quant_q6k(x, reinterpret_cast<BlockQ6K*>(blk)); break;
      default: break;
    }
  }
}

}  // namespace specchat::cpu
