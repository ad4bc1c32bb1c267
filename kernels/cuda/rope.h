// Rotary embedding on the device. CPU twin: cpu::rope (kernels/cpu/ops.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specchat::cuda {

// In place on x [n_tokens, n_head, head_dim] (f32, device), pairing adjacent dimensions
// (2i, 2i+1) as llama's GGUF convention, angle pos[t] * theta^(-2i/head_dim) computed in double
// exactly as cpu::rope; pos [n_tokens] int32 on the device. head_dim must be even (else
// std::invalid_argument). Throws CudaError on a launch error.
void rope(float* x, const int32_t* pos, int n_tokens, int n_head, int head_dim, float theta,
          cudaStream_t stream);

}  // namespace specchat::cuda
