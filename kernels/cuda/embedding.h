// Token embedding gather on the device. CPU twin: kernels/cpu/embedding.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cuda {

// out[n_tokens, d_model] (f32, device) = table[ids[t], :] widened to f32 (exact for f16/bf16;
// block types are dequantized by embedding_gather_quant, kernels/cuda/quant.h).
// table [n_vocab, d_model] row-major on the device in `dtype`; ids [n_tokens] on the device.
// Precondition: every id is in [0, n_vocab) — the caller checks ids on the host (the kernel
// does not know n_vocab). n_tokens == 0 launches nothing. Throws CudaError on a launch error.
void embedding_gather(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens,
                      int d_model, cudaStream_t stream);

}  // namespace specchat::cuda
