#include "kernels/cpu/embedding.h"

#include "kernels/cpu/quant.h"

namespace specchat::cpu {

void embedding_gather(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens,
                      int d_model) {
  const size_t row_bytes = static_cast<size_t>(dtype_row_bytes(dtype, static_cast<uint64_t>(d_model)));
  for (int t = 0; t < n_tokens; ++t) {
    const auto* row = static_cast<const char*>(table) + static_cast<size_t>(ids[t]) * row_bytes;
    dequantize_row_ref(dtype, row, out + static_cast<int64_t>(t) * d_model, d_model);
  }
}

}  // namespace specchat::cpu
