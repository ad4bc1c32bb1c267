// The SIMD variants of cpu::linear's integer path for q4_K, q5_K and q6_K (linear_q8.h,
// Format::k256): one kernel (linear_q8_k.inc) compiled for AVX2 and for AVX-512 VNNI (256-bit
// vectors with vpdpwssd). Both give the scalar twin's bits (linear_q8.cpp, dot_k_generic).
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/linear_q8.h"
#include "kernels/cpu/linear_tiling.h"
#include "kernels/cpu/quant.h"

namespace specchat::cpu::q8 {

using tiling::kRows;

namespace {

// Scales and mins of a q4_K/q5_K block as bytes: [0..8) the 8 sub-block scales, [8..16) the mins
// (scale_min_k4's bit layout, four sub-blocks per 32-bit word).
inline void k4_scale_bytes(const uint8_t* scales, uint8_t out[16]) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, scales, 4);
  std::memcpy(&w1, scales + 4, 4);
  std::memcpy(&w2, scales + 8, 4);
  const uint32_t o[4] = {w0 & 0x3F3F3F3Fu, (w2 & 0x0F0F0F0Fu) | (((w0 >> 6) & 0x03030303u) << 4), w1 & 0x3F3F3F3Fu,
                         ((w2 >> 4) & 0x0F0F0F0Fu) | (((w1 >> 6) & 0x03030303u) << 4)};
  std::memcpy(out, o, 16);
}

// Software prefetch 16 KiB ahead of [p, p + n) (see linear_q8_x86.cpp: the integer work per
// byte leaves the hardware prefetchers behind).
constexpr size_t kPrefetch = 16384;
inline void prefetch_block(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetch + o), _MM_HINT_T0);
}

#define SPECCHAT_K_TARGET __attribute__((target("avx2,fma,f16c")))
#define SPECCHAT_K_VNNI 0
#define SPECCHAT_K_NS k_avx2
#include "kernels/cpu/linear_q8_k.inc"
#undef SPECCHAT_K_TARGET
#undef SPECCHAT_K_VNNI
#undef SPECCHAT_K_NS

// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define SPECCHAT_K_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define SPECCHAT_K_VNNI 1
#define SPECCHAT_K_NS k_avx512
#include "kernels/cpu/linear_q8_k.inc"
#undef SPECCHAT_K_TARGET
#undef SPECCHAT_K_VNNI
#undef SPECCHAT_K_NS
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void rows_k_avx2(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  k_avx2::rows(a, w, t, y, n_out, j0, nr);
}
void rows_k_avx512(const Act& a, const void* w, DType t, float* y, int n_out, int j0, int nr) {
  k_avx512::rows(a, w, t, y, n_out, j0, nr);
}

}  // namespace specchat::cpu::q8

#endif  // __x86_64__
