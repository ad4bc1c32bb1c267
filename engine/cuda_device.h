// The CUDA backend's device state (engine/cuda_backend.cpp runs forwards on it,
// engine/cuda_backend_load.cpp allocates and fills it): one pool allocation holding weights, KV
// cache and activations, a pinned host staging buffer, the stream and cuBLAS. Internal to
// those two files.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend_weights.h"
#include "engine/cuda_backend.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/matmul.h"

namespace specchat {

// One weight tensor in the pool. Matrices are [n_out, n_in] row-major (ne = {n_in, n_out}).
struct DeviceTensor {
  std::string name;
  std::vector<uint64_t> ne;
  bool norm = false;            // f32 vector (norm weights) rather than a matrix
  DType dtype = DType::f16;     // f32 for norms
  void* p = nullptr;
  uint64_t n_elements() const { return ne.size() == 1 ? ne[0] : ne[0] * ne[1]; }
  size_t bytes() const {
    return static_cast<size_t>(dtype_row_bytes(dtype, ne[0]) * (ne.size() == 1 ? 1 : ne[1]));
  }
};

struct CudaBackend::Device {
  struct Layer {
    const DeviceTensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
  };
  int device = 0;
  cuda::DeviceInfo info;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::Blas> blas;
  void* pool = nullptr;
  size_t pool_bytes = 0;
  char* host = nullptr;  // pinned: [inputs: in_capacity][logits: max_batch * n_vocab f32][hidden]
  size_t host_bytes = 0;

  std::vector<DeviceTensor> tensors;  // canonical order, see tensor_list()
  const DeviceTensor *tok_embd = nullptr, *output = nullptr, *output_norm = nullptr;
  std::vector<Layer> layers;
  size_t weights_bytes = 0;  // sum of tensor sizes (alignment padding not counted)

  float *k_cache = nullptr, *v_cache = nullptr;  // [n_seq][n_layer][n_ctx][kv_dim] each
  size_t kv_bytes = 0;

  float *x = nullptr, *xb = nullptr, *q = nullptr, *att = nullptr, *gate = nullptr, *up = nullptr;
  float *kbuf = nullptr, *vbuf = nullptr;  // [max_batch, kv_dim]: K/V rows before they go to their sequences
  float* logits = nullptr;
  float* hidden = nullptr;  // [n_layer + 1, max_batch, d_model]: requested hidden states
  size_t hidden_bytes = 0;
  void* mm_scratch = nullptr;
  size_t mm_scratch_bytes = 0;
  void* in_buf = nullptr;  // ids [n], pos [n], visible [n, n_masked] packed per forward
  size_t in_capacity = 0;
  int32_t* path = nullptr;  // [max_batch]
  size_t activation_bytes = 0;
  // Profiling (set_profile): events recorded after each operation, and the operation each one
  // closes; created on first use and kept.
  std::vector<cudaEvent_t> prof_events;
  std::vector<int> prof_ops;

  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() {
    // Destructors must not throw: errors here are ignored (the context may already be gone).
    cudaSetDevice(device);
    if (stream) cudaStreamSynchronize(stream);
    blas.reset();
    for (cudaEvent_t e : prof_events) cudaEventDestroy(e);
    if (pool) cudaFree(pool);
    if (host) cudaFreeHost(host);
    if (stream) cudaStreamDestroy(stream);
  }
  float* host_logits() const { return reinterpret_cast<float*>(host + in_capacity); }
  float* host_hidden() const { return reinterpret_cast<float*>(host + in_capacity + logits_bytes); }
  size_t logits_bytes = 0;
};

// "1.23 GiB".
std::string cuda_gib(size_t bytes);

}  // namespace specchat
