// Token embedding gather; CPU twin of kernels/cuda/embedding.h.
#pragma once

#include <cstdint>

#include "kernels/dtype.h"

namespace specchat::cpu {

// out[n_tokens, d_model] (f32) = table[ids[t], :] widened to f32 (exact; block types are
// dequantized as dequantize_row_ref does). table [n_vocab, d_model] row-major in dtype.
// Preconditions: ids in [0, n_vocab), checked by the caller; for block types d_model a multiple
// of the block size (std::invalid_argument otherwise).
void embedding_gather(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens,
                      int d_model);

}  // namespace specchat::cpu
