#include <stdexcept>

#include "kernels/cuda/check.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/matmul.h"

namespace specchat::cuda {

Blas::Blas(size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  SPECCHAT_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    if (workspace_bytes_ > 0) {
      SPECCHAT_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
      SPECCHAT_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, workspace_bytes_));
    }
  } catch (...) {
    if (workspace_ != nullptr) (void)cudaFree(workspace_);
    (void)cublasDestroy(handle_);
    throw;
  }
}

Blas::~Blas() {
  // Errors here cannot be reported (destructor); the handle and memory are gone either way.
  (void)cublasDestroy(handle_);
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
}

void Blas::set_stream(cudaStream_t stream) {
  if (stream == stream_) return;
  SPECCHAT_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  stream_ = stream;
  if (workspace_ != nullptr) {
    SPECCHAT_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, workspace_bytes_));
  }
}

// Row-major to cuBLAS' column-major: a row-major [R, C] matrix with leading dimension C is the
// column-major [C, R] matrix (its transpose) with the same leading dimension. So
//   y (row-major [n_tokens, n_out])  = column-major Y' [n_out, n_tokens], ldc = n_out
//   x (row-major [n_tokens, n_in])   = column-major X' [n_in, n_tokens],  ldb = n_in
//   W (row-major [n_out, n_in])      = column-major W' [n_in, n_out],     lda = n_in
// and y = x · W^T  <=>  Y' = W · X' = (W')^T · X'. Hence transa = T (A = W', lda = n_in),
// transb = N (B = X', ldb = n_in), m = n_out, n = n_tokens, k = n_in, ldc = n_out.
void matmul(Blas& blas, const float* x, const void* w, DType w_dtype, float* y, int n_tokens,
            int n_in, int n_out, void* x_scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (n_tokens < 0 || n_in < 1 || n_out < 0) throw std::invalid_argument("matmul: bad sizes");
  if (n_tokens == 0 || n_out == 0) return;
  const size_t need = matmul_scratch_bytes(w_dtype, n_tokens, n_in);
  if (need > 0 && (x_scratch == nullptr || scratch_bytes < need)) {
    throw std::invalid_argument("matmul: x_scratch smaller than matmul_scratch_bytes()");
  }
  blas.set_stream(stream);
  const void* b = x;
  cudaDataType_t type = CUDA_R_32F;
  if (w_dtype != DType::f32) {
    // cublasGemmEx wants A and B of one type: round x to the weight type first.
    convert_from_f32(x, x_scratch, w_dtype, static_cast<int64_t>(n_tokens) * n_in, stream);
    b = x_scratch;
    type = w_dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  }
  const float alpha = 1.0f, beta = 0.0f;
  SPECCHAT_CUBLAS_CHECK(cublasGemmEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, n_out, n_tokens, n_in,
                                     &alpha, w, type, n_in, b, type, n_in, &beta, y, CUDA_R_32F,
                                     n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace specchat::cuda
