// Element-wise ops on the device. CPU twins: cpu::swiglu, cpu::add_inplace (kernels/cpu/ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specchat::cuda {

// out[n] = silu(gate[n]) * up[n]   (SwiGLU, Shazeer 2020); f32 device pointers; out may alias
// gate or up. Throws CudaError on a launch error.
void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);

// x[n] += y[n]; f32 device pointers. Throws CudaError on a launch error.
void add_inplace(float* x, const float* y, int64_t n, cudaStream_t stream);

}  // namespace specchat::cuda
