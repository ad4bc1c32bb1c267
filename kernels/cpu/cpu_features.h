// Runtime CPU feature checks shared by the SIMD kernels' dispatch (x86-64 only; false elsewhere).
// F16C is read from cpuid (leaf 1, ECX bit 29) because clang's __builtin_cpu_supports does not
// know "f16c"; the others use the compiler builtin. Each result is computed once.
#pragma once

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace specchat::cpu {

#if defined(__x86_64__)
inline bool cpu_has_f16c() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
  }();
  return ok;
}
// AVX2 + FMA + F16C: the AVX2 kernels' target("avx2,fma,f16c").
inline bool cpu_has_avx2_fma_f16c() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
  return ok;
}
// AVX-512F + AVX2 + FMA + F16C: the AVX-512 kernels' target("avx512f,avx2,fma,f16c").
inline bool cpu_has_avx512_fma_f16c() {
  static const bool ok = __builtin_cpu_supports("avx512f") && cpu_has_avx2_fma_f16c();
  return ok;
}
// AVX-512 F + BW + VL + VNNI (and AVX2 + FMA + F16C): cpu::linear's integer path (linear_q8.h).
inline bool cpu_has_avx512_vnni() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                         cpu_has_avx2_fma_f16c();
  return ok;
}
#else
inline bool cpu_has_avx512_vnni() { return false; }
inline bool cpu_has_f16c() { return false; }
inline bool cpu_has_avx2_fma_f16c() { return false; }
inline bool cpu_has_avx512_fma_f16c() { return false; }
#endif

}  // namespace specchat::cpu
