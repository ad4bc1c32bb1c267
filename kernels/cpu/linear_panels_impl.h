// Internal to linear_panels.cpp and linear_panels_x86.cpp: the register tiles of each variant.
#pragma once

#include <cstdint>

#include "kernels/cpu/linear_panels.h"

namespace specchat::cpu::panels {

// Largest tile of each variant: rows of x per pass (Rmax) and, for a pass of R rows, panels per
// pass (R · P accumulators plus P weight vectors within the register file).
inline constexpr int kMaxRows512 = 8;
constexpr int max_panels512(int rows) {
  constexpr int p[9] = {0, 8, 6, 6, 5, 4, 4, 3, 3};
  return p[rows];
}
inline constexpr int kMaxRows256 = 4;
constexpr int max_panels256(int rows) {
  constexpr int p[5] = {0, 3, 2, 1, 1};
  return p[rows];
}

#if defined(__x86_64__)
// Rows [0, R) of x (row stride n_in) × panels [0, P) from w (panel stride n_in · 16) into
// y[t, j0 + …] (row stride n_out; lanes at or past n_out are not stored). 1 <= R <= Rmax,
// 1 <= P <= max_panels(R); the CPU must have the ISA.
void tile_avx512(bool bf16, int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0);
void tile_avx2(bool bf16, int R, int P, const float* x, const uint16_t* w, float* y, int n_in, int n_out, int j0);
#endif

}  // namespace specchat::cpu::panels
