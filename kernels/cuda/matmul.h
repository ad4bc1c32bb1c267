// Matrix products through cuBLAS (cublasGemmEx, f32 accumulation). CPU twin: the typed
// cpu::matmul in kernels/cpu/matmul_typed.h.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/dtype.h"

namespace specchat::cuda {

// Owns one cuBLAS handle and its workspace (allocated once, so nothing allocates in the decode
// loop and the handle can be used inside CUDA graph capture). Not thread-safe: one per stream
// owner. Throws CudaError when cuBLAS or the workspace cannot be created.
class Blas {
 public:
  explicit Blas(size_t workspace_bytes = size_t{32} << 20);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Binds the handle to `stream` (no-op when already bound). cublasSetStream resets the
  // workspace to cuBLAS' own pool, so the user workspace is set again here.
  void set_stream(cudaStream_t stream);
  cublasHandle_t handle() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  cudaStream_t stream_ = nullptr;
};

// Bytes of x_scratch matmul() needs: x converted to the weight type (0 for f32 weights).
constexpr size_t matmul_scratch_bytes(DType w_dtype, int n_tokens, int n_in) {
  return w_dtype == DType::f32 ? 0
                               : static_cast<size_t>(n_tokens) * static_cast<size_t>(n_in) * 2;
}

// y[n_tokens, n_out] (f32) = x[n_tokens, n_in] (f32) · W^T, W [n_out, n_in] row-major in
// w_dtype (GGUF/PyTorch layout); all device pointers. cublasGemmEx needs A and B of one type, so
// for f16/bf16 weights x is first rounded (to nearest even) into x_scratch (at least
// matmul_scratch_bytes() bytes, device) and the product runs with CUBLAS_COMPUTE_32F: products
// and sums in f32, only the input rounding differs from an f32 product. F32 weights use f32
// inputs and CUBLAS_COMPUTE_32F without TF32. Runs on `stream` (binds blas to it).
// std::invalid_argument when scratch_bytes is too small or a size is negative; CudaError when
// cuBLAS fails. n_tokens == 0 or n_out == 0 does nothing.
void matmul(Blas& blas, const float* x, const void* w, DType w_dtype, float* y, int n_tokens,
            int n_in, int n_out, void* x_scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace specchat::cuda
