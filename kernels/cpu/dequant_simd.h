// SIMD dequantizers of the block weight types: the inner step of cpu::linear's fused
// dequantize-and-dot (a tile of weights is dequantized into L1 and consumed there, never
// written back to memory). Internal to kernels/cpu; tests hold them to dequantize_row_ref.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cpu {

// AVX2 + FMA + F16C twin of dequantize_row_ref for the block types: dst[n] bit-identical to it
// (the same f32 scale products; fused multiply-subtract where the reference uses std::fma) for
// every scale but a signalling NaN, whose payload F16C quiets.
// n a multiple of the block size. Precondition: the CPU has avx2, fma and f16c (the caller
// dispatches); element types are not handled here (std::invalid_argument).
void dequantize_row_avx2(DType t, const void* src, float* dst, int64_t n);

// True when this CPU runs dequantize_row_avx2.
bool dequant_avx2_supported();

}  // namespace specchat::cpu
