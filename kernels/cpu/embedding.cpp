#include "kernels/cpu/embedding.h"

#include "kernels/cpu/convert.h"

namespace specchat::cpu {

void embedding_gather(const void* table, DType dtype, const int32_t* ids, float* out, int n_tokens,
                      int d_model) {
  const size_t row_bytes = static_cast<size_t>(d_model) * dtype_size(dtype);
  for (int t = 0; t < n_tokens; ++t) {
    const auto* row = static_cast<const char*>(table) + static_cast<size_t>(ids[t]) * row_bytes;
    convert_to_f32(row, dtype, out + static_cast<int64_t>(t) * d_model, d_model);
  }
}

}  // namespace specchat::cpu
