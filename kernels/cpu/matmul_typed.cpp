#include "kernels/cpu/matmul_typed.h"

#include <cstdint>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/ops.h"

namespace specchat::cpu {

void matmul(const float* x, const void* w, DType w_dtype, float* y, int n_tokens, int n_in,
            int n_out, void* /*x_scratch*/, size_t /*scratch_bytes*/) {
  if (w_dtype == DType::f32) {
    matmul(x, static_cast<const float*>(w), y, n_tokens, n_in, n_out);
    return;
  }
  const int64_t nx = static_cast<int64_t>(n_tokens) * n_in;
  // x rounded to the weight type and back, as the device converts x before cublasGemmEx.
  std::vector<float> xr(static_cast<size_t>(nx));
  std::vector<uint16_t> tmp(static_cast<size_t>(nx));
  convert_from_f32(x, tmp.data(), w_dtype, nx);
  convert_to_f32(tmp.data(), w_dtype, xr.data(), nx);
  std::vector<float> wrow(static_cast<size_t>(n_in));
  const auto* w16 = static_cast<const uint16_t*>(w);
  for (int j = 0; j < n_out; ++j) {
    convert_to_f32(w16 + static_cast<int64_t>(j) * n_in, w_dtype, wrow.data(), n_in);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = xr.data() + static_cast<int64_t>(t) * n_in;
      double s = 0;
      for (int i = 0; i < n_in; ++i) s += static_cast<double>(xt[i]) * wrow[static_cast<size_t>(i)];
      y[static_cast<int64_t>(t) * n_out + j] = static_cast<float>(s);
    }
  }
}

}  // namespace specchat::cpu
