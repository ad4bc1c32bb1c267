// Type conversion and deterministic random fill on the device (for building a 7B-shaped model
// with random weights without a file). CPU twins: kernels/cpu/convert.h (bit-identical).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cuda {

// dst[n] (dtype) = src[n] (f32), rounded to nearest even (f16 overflow -> inf, NaN kept).
void convert_from_f32(const float* src, void* dst, DType dtype, int64_t n, cudaStream_t stream);

// dst[n] (f32) = src[n] (dtype), exact.
void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n, cudaStream_t stream);

// dst[i] = a * (2u - 1) for i < n, with u = top 24 bits of splitmix64(seed, i) / 2^24: uniform
// on [-a, a), computed exactly in f32 then rounded to dtype (nearest even). The same (seed, i)
// gives the same value on the CPU twin, bit for bit.
void random_fill(void* dst, DType dtype, int64_t n, uint64_t seed, float a, cudaStream_t stream);

// n values (whole blocks) of block type t at dst (device): random bytes except each block's f16
// scales (kernels/random_blocks.h), bit for bit cpu::random_fill_blocks. std::invalid_argument
// for an element type or partial blocks; CudaError on a launch error.
void random_fill_blocks(void* dst, DType t, int64_t n, uint64_t seed, float a, cudaStream_t stream);

}  // namespace specchat::cuda
