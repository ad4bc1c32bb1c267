// CudaBackend: a llama forward on one NVIDIA GPU. Compiled only when SPECCHAT_CUDA is ON; this
// header needs no CUDA headers (device state lives behind a pointer to an incomplete type).
//
// Memory: ONE device allocation made at load and carved into 256-byte aligned regions
//   weights      token_embd, output (shared when tied), per layer attn_norm, wq, wk, wv, wo,
//                ffn_norm, w_gate, w_up, w_down; matrices in their file dtype (F16/BF16; F32
//                and Q8_0 matrices are converted to F16 on upload), norm vectors f32
//   kv           K then V, each f32 [n_layer][n_ctx][n_head_kv * head_dim] (the host layout)
//   activations  x, xb [max_batch, d_model]; q, att [max_batch, n_head * head_dim];
//                gate, up [max_batch, d_ff]; logits [max_batch, n_vocab]; the matmul's
//                converted-input scratch [max_batch, max(d_model, n_head·head_dim, d_ff)] f16
//   inputs       ids, pos [max_batch] int32 and the mask [max_batch, n_ctx + max_batch] uint8,
//                uploaded with one copy per forward; the compaction path [max_batch] int32
// plus a pinned host staging buffer (inputs out, logits back) and cuBLAS' 32 MiB workspace, both
// allocated at load. A forward allocates nothing. K is written by the Q/K/V matmul straight into
// its cache rows and rotated there (no copy).
#pragma once

#include <memory>

#include "engine/backend.h"

namespace specchat {

class CudaBackend final : public Backend, public KvRowStore {
 public:
  struct Device;  // CUDA state (stream, cuBLAS, pool), defined in cuda_backend.cpp

  // Use the factories in backend.h (make_cuda_backend, make_cuda_backend_random).
  CudaBackend(const ModelConfig& c, const BackendShape& s, std::unique_ptr<Device> dev);
  ~CudaBackend() override;

  BackendKind kind() const override { return BackendKind::cuda; }
  std::span<const float> forward(const ForwardArgs& a, KvCache& kv) override;
  KvRowStore* row_store() override { return this; }
  MemoryInfo memory(const KvCache& kv) const override;
  std::string device_name() const override;

  void compact(std::span<const int32_t> src_slots, int dst0) override;
  size_t bytes() const override;

 private:
  ModelConfig cfg_;
  BackendShape shape_;
  std::unique_ptr<Device> d_;
};

}  // namespace specchat
