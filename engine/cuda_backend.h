// CudaBackend: a llama forward on one NVIDIA GPU. Compiled only when SPECCHAT_CUDA is ON; this
// header needs no CUDA headers (device state lives behind a pointer to an incomplete type).
//
// Memory: ONE device allocation made at load and carved into 256-byte aligned regions
//   weights      token_embd, output (shared when tied), per layer attn_norm, wq, wk, wv, wo,
//                ffn_norm, w_gate, w_up, w_down; matrices in their file type (F16/BF16 and the
//                block types; F32 matrices are converted to F16 on upload), norm vectors f32
//   kv           K then V, each f32 [n_seq][n_layer][n_ctx][n_head_kv * head_dim] (per sequence
//                the host layout)
//   activations  x, xb [max_batch, d_model]; q, att [max_batch, n_head * head_dim];
//                gate, up [max_batch, d_ff]; kbuf, vbuf [max_batch, n_head_kv * head_dim];
//                logits [max_batch, n_vocab]; hidden [n_layer + 1, max_batch, d_model]; the matmul's
//                converted-input scratch [max_batch, max(d_model, n_head·head_dim, d_ff)] f16
//   inputs       ids, pos [max_batch] int32 and the mask [max_batch, n_ctx + max_batch] uint8,
//                uploaded with one copy per forward; the compaction path [max_batch] int32
// plus a pinned host staging buffer (inputs out, logits back) and cuBLAS' 32 MiB workspace, both
// allocated at load. A forward allocates nothing. K and V rows are computed for the whole batch,
// rotated, then copied to each sequence's slots (one device copy per sequence and layer).
#pragma once

#include <memory>
#include <vector>

#include "engine/backend.h"

namespace specchat {

class CudaBackend final : public Backend {
 public:
  struct Device;  // CUDA state (stream, cuBLAS, pool), defined in cuda_backend.cpp

  // Use the factories in backend.h (make_cuda_backend, make_cuda_backend_random).
  CudaBackend(const ModelConfig& c, const BackendShape& s, std::unique_ptr<Device> dev);
  ~CudaBackend() override;

  BackendKind kind() const override { return BackendKind::cuda; }
  ForwardOut forward(const ForwardArgs& a) override;
  KvRowStore* row_store(int seq) override;
  MemoryInfo memory() const override;
  std::string device_name() const override;
  // Per-operation device time (CUDA events between operations, read after each forward's sync;
  // engine/op_profile.h). null stops recording. Always true.
  bool set_profile(OpProfile* p) override;

 private:
  // Sequence seq's K/V rows in the device pool.
  class SeqStore final : public KvRowStore {
   public:
    SeqStore(CudaBackend& b, int seq) : b_(b), seq_(seq) {}
    void compact(std::span<const int32_t> src_slots, int dst0) override;
    size_t bytes() const override;

   private:
    CudaBackend& b_;
    int seq_;
  };
  // Path compaction within sequence seq (KvRowStore::compact's contract).
  void compact(int seq, std::span<const int32_t> src_slots, int dst0);
  ModelConfig cfg_;
  BackendShape shape_;
  std::unique_ptr<Device> d_;
  std::vector<std::unique_ptr<SeqStore>> stores_;  // [n_seq]
  OpProfile* prof_ = nullptr;
};

}  // namespace specchat
