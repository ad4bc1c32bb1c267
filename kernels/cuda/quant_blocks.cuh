// Block decoding shared by the CUDA quant kernels (kernels/cuda/quant.cu) and their host-side
// check (tests/cuda/host/quant_chunks_host.cu, which runs these same functions on the CPU, so
// the chunk indexing is tested on machines without a GPU). nvcc only (.cu files).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/dtype.h"

#define SPECCHAT_HD __host__ __device__
// Unroll hints for the device pass only (the host compiler warns on an unknown pragma).
#ifdef __CUDA_ARCH__
#define SPECCHAT_UNROLL _Pragma("unroll")
#else
#define SPECCHAT_UNROLL
#endif

namespace specchat::cuda::blocks {

SPECCHAT_HD inline float f16_at(const uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

// The 6-bit scale and min of sub-block s of a q4_K/q5_K block (cpu::scale_min_k4).
SPECCHAT_HD inline void scale_min(int s, const uint8_t* sc, int* scale, int* min) {
  if (s < 4) {
    *scale = sc[s] & 63;
    *min = sc[s + 4] & 63;
  } else {
    *scale = (sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4);
    *min = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4);
  }
}

// Value i of the block at b (layouts: kernels/cpu/quant.h), as cpu::dequantize_row_ref computes it.
template <DType T>
SPECCHAT_HD inline float value_at(const uint8_t* b, int i) {
  if constexpr (T == DType::q8_0) {
    return f16_at(b) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
  } else if constexpr (T == DType::q4_0) {
    const int q = i < 16 ? (b[2 + i] & 0xF) : (b[2 + i - 16] >> 4);
    return f16_at(b) * static_cast<float>(q - 8);
  } else if constexpr (T == DType::q4_k || T == DType::q5_k) {
    const int s = i / 32, l = i % 32;
    const uint8_t* qs = b + (T == DType::q4_k ? 16 : 48);
    int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xF;
    if constexpr (T == DType::q5_k) q |= ((b[16 + l] >> s) & 1) << 4;
    int sc, m;
    scale_min(s, b + 4, &sc, &m);
    const float d1 = f16_at(b) * static_cast<float>(sc), m1 = f16_at(b + 2) * static_cast<float>(m);
    return fmaf(d1, static_cast<float>(q), -m1);
  } else {  // q6_K: ql[128], qh[64], scales[16], d
    const int h = i / 128, r = i % 128, k = r / 32, l = r % 32;
    const uint8_t lo = b[64 * h + 32 * (k % 2) + l];
    const int nib = k < 2 ? (lo & 0xF) : (lo >> 4);
    const int q = nib | (((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
    const float ds = f16_at(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + i / 16]));
    return ds * static_cast<float>(q - 32);
  }
}

// The 32 bytes at p as 8 little-endian words: two 16-byte loads when p is 16-byte aligned
// (kVec), else byte loads (any address).
template <bool kVec>
SPECCHAT_HD inline void load32(const uint8_t* p, uint32_t (&w)[8]) {
  if constexpr (kVec) {
    const uint4 a = *reinterpret_cast<const uint4*>(p);
    const uint4 b = *reinterpret_cast<const uint4*>(p + 16);
    w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
    w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
  } else {
SPECCHAT_UNROLL
    for (int j = 0; j < 8; ++j) {
      w[j] = static_cast<uint32_t>(p[4 * j]) | (static_cast<uint32_t>(p[4 * j + 1]) << 8) |
             (static_cast<uint32_t>(p[4 * j + 2]) << 16) | (static_cast<uint32_t>(p[4 * j + 3]) << 24);
    }
  }
}

// Little-endian 16-bit loads (every block field of these types is at an even offset): 8 of them
// make 16 bytes when the base is 2-byte aligned (kVec), else byte loads.
template <bool kVec>
SPECCHAT_HD inline void load16_even(const uint8_t* p, uint32_t (&w)[4]) {
SPECCHAT_UNROLL
  for (int j = 0; j < 4; ++j) {
    if constexpr (kVec) {
      const auto* h = reinterpret_cast<const unsigned short*>(p + 4 * j);
      w[j] = static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16);
    } else {
      w[j] = static_cast<uint32_t>(p[4 * j]) | (static_cast<uint32_t>(p[4 * j + 1]) << 8) |
             (static_cast<uint32_t>(p[4 * j + 2]) << 16) | (static_cast<uint32_t>(p[4 * j + 3]) << 24);
    }
  }
}

SPECCHAT_HD inline int byte_of(const uint32_t* w, int j) { return static_cast<int>((w[j >> 2] >> (8 * (j & 3))) & 0xFFu); }

// Values 32c .. 32c + 31 of a weight row (chunk c: one q8_0/q4_0 block, or one 32-value
// sub-block of a k-quant super-block), each as value_at<T> computes it. kVec: the row starts
// 16-byte aligned, so the k-quant fields can be read with wide loads.
template <DType T, bool kVec>
SPECCHAT_HD inline void chunk_values(const uint8_t* row, int c, float (&v)[32]) {
  if constexpr (T == DType::q8_0) {
    const uint8_t* b = row + static_cast<int64_t>(c) * 34;
    const float d = f16_at(b);
    uint32_t w[8];
    uint32_t lo[4], hi[4];
    load16_even<kVec>(b + 2, lo);
    load16_even<kVec>(b + 18, hi);
SPECCHAT_UNROLL
    for (int j = 0; j < 4; ++j) { w[j] = lo[j]; w[4 + j] = hi[j]; }
SPECCHAT_UNROLL
    for (int l = 0; l < 32; ++l) v[l] = d * static_cast<float>(static_cast<int8_t>(byte_of(w, l)));
  } else if constexpr (T == DType::q4_0) {
    const uint8_t* b = row + static_cast<int64_t>(c) * 18;
    const float d = f16_at(b);
    uint32_t w[4];
    load16_even<kVec>(b + 2, w);
SPECCHAT_UNROLL
    for (int l = 0; l < 16; ++l) {
      const int q = byte_of(w, l);
      v[l] = d * static_cast<float>((q & 0xF) - 8);
      v[16 + l] = d * static_cast<float>((q >> 4) - 8);
    }
  } else if constexpr (T == DType::q4_k || T == DType::q5_k) {
    constexpr int bb = T == DType::q4_k ? 144 : 176;
    const uint8_t* b = row + static_cast<int64_t>(c / 8) * bb;
    const int s = c % 8;
    int sc, m;
    scale_min(s, b + 4, &sc, &m);
    const float d1 = f16_at(b) * static_cast<float>(sc), m1 = f16_at(b + 2) * static_cast<float>(m);
    uint32_t w[8];
    load32<kVec>(b + (T == DType::q4_k ? 16 : 48) + 32 * (s / 2), w);
    const int shift = 4 * (s % 2);
    if constexpr (T == DType::q5_k) {
      uint32_t h[8];
      load32<kVec>(b + 16, h);
SPECCHAT_UNROLL
      for (int l = 0; l < 32; ++l) {
        const int q = ((byte_of(w, l) >> shift) & 0xF) | (((byte_of(h, l) >> s) & 1) << 4);
        v[l] = fmaf(d1, static_cast<float>(q), -m1);
      }
    } else {
SPECCHAT_UNROLL
      for (int l = 0; l < 32; ++l) v[l] = fmaf(d1, static_cast<float>((byte_of(w, l) >> shift) & 0xF), -m1);
    }
  } else {  // q6_K: ql[128], qh[64], scales[16], d; chunk s = 4h + k covers values 128h + 32k + l
    const uint8_t* b = row + static_cast<int64_t>(c / 8) * 210;
    const int s = c % 8, h = s / 4, k = s % 4;
    const float d = f16_at(b + 208);
    const float ds0 = d * static_cast<float>(static_cast<int8_t>(b[192 + 2 * s]));
    const float ds1 = d * static_cast<float>(static_cast<int8_t>(b[192 + 2 * s + 1]));
    uint32_t lw[8], hw[8];
    {
      uint32_t a0[4], a1[4];
      load16_even<kVec>(b + 64 * h + 32 * (k % 2), a0);
      load16_even<kVec>(b + 64 * h + 32 * (k % 2) + 16, a1);
      uint32_t b0[4], b1[4];
      load16_even<kVec>(b + 128 + 32 * h, b0);
      load16_even<kVec>(b + 128 + 32 * h + 16, b1);
SPECCHAT_UNROLL
      for (int j = 0; j < 4; ++j) { lw[j] = a0[j]; lw[4 + j] = a1[j]; hw[j] = b0[j]; hw[4 + j] = b1[j]; }
    }
    const int nshift = k < 2 ? 0 : 4;
SPECCHAT_UNROLL
    for (int l = 0; l < 32; ++l) {
      const int q = ((byte_of(lw, l) >> nshift) & 0xF) | (((byte_of(hw, l) >> (2 * k)) & 3) << 4);
      v[l] = (l < 16 ? ds0 : ds1) * static_cast<float>(q - 32);
    }
  }
}


// Lane `lane`'s share of weight row `row` (n_in values) dotted with rows t0 .. t0 + nt − 1 of x
// (row stride n_in): chunks lane, lane + 32, … in that order, added to acc[k] (kTok >= nt
// entries). The kernel then sums the 32 lanes with a butterfly (warp_sum).
template <DType T, bool kVec, int kTok>
SPECCHAT_HD inline void lane_partial(const uint8_t* row, const float* x, int n_in, int t0, int nt, int lane,
                                     float (&acc)[kTok]) {
  const int n_chunks = n_in / 32;
  for (int c = lane; c < n_chunks; c += 32) {
    float v[32];
    chunk_values<T, kVec>(row, c, v);
SPECCHAT_UNROLL
    for (int k = 0; k < kTok; ++k) {
      if (k < nt) {
        const float* xr = x + static_cast<int64_t>(t0 + k) * n_in + 32 * static_cast<int64_t>(c);
        float s = acc[k];
        if constexpr (kVec) {
SPECCHAT_UNROLL
          for (int q = 0; q < 8; ++q) {
            const float4 xv = reinterpret_cast<const float4*>(xr)[q];
            s = fmaf(v[4 * q], xv.x, s);
            s = fmaf(v[4 * q + 1], xv.y, s);
            s = fmaf(v[4 * q + 2], xv.z, s);
            s = fmaf(v[4 * q + 3], xv.w, s);
          }
        } else {
SPECCHAT_UNROLL
          for (int l = 0; l < 32; ++l) s = fmaf(v[l], xr[l], s);
        }
        acc[k] = s;
      }
    }
  }
}

}  // namespace specchat::cuda::blocks
