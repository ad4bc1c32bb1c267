// CpuBackend: the decoder forward (llama, qwen2, qwen3: architecture.h) on the CPU, with the
// weights kept in their file type. Matrices of F32 and the block types (Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K) are typed views into the GGUF mapping (the pages are read by the kernels and shared with
// the page cache). F16 and BF16 matrices are repacked once at load into panels of 16 output rows
// (cpu::pack_panels: same values, same bytes up to padding), whose product runs at the FMA peak
// for verification batches, and the file's pages of those tensors are released
// (GgufFile::release_pages); the token embedding stays in place. So the weight bytes held
// still equal the file's tensor bytes (plus a packed LM head when it is tied to the embedding),
// but as private memory: two processes on one file, or one file loaded as target and draft,
// hold the panels twice. SPECCHAT_CPU_PACK=0 in the environment keeps every matrix in the
// mapping (shared page cache, the row-major kernels), and so does a load whose panels would not
// fit in 3/4 of the memory available (MemAvailable) or whose arena cannot be mapped. The reference forward: the CUDA backend and every CUDA op
// are checked against it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace specchat {

// A weight matrix [n_out, n_in] row-major (PyTorch layout; GGUF ne = {n_in, n_out}) in `type`.
// `data` points into the model file's mapping or into CpuBackend::Weights::owned; with `panels`
// (f16/bf16 only) it is the matrix repacked by cpu::pack_panels (kernels/cpu/linear_panels.h).
struct WeightView {
  const void* data = nullptr;
  DType type = DType::f32;
  int n_out = 0, n_in = 0;
  bool panels = false;
  size_t bytes() const { return static_cast<size_t>(n_out) * static_cast<size_t>(dtype_row_bytes(type, static_cast<uint64_t>(n_in))); }
};

// The product y [rows, w.n_out] = x [rows, w.n_in] · wᵀ as a cpu::linear_multi job (on the panel
// kernels when w.panels), and that product alone.
inline cpu::LinearJob linear_job(const float* x, const WeightView& w, float* y, int rows,
                                 cpu::Activations act = cpu::Activations::q8) {
  return cpu::LinearJob{x, w.data, w.type, y, rows, w.n_in, w.n_out, act, w.panels};
}
inline void linear_view(const float* x, const WeightView& w, float* y, int rows, cpu::ThreadPool* pool,
                        cpu::Activations act = cpu::Activations::q8) {
  const cpu::LinearJob j = linear_job(x, w, y, rows, act);
  cpu::linear_multi(std::span<const cpu::LinearJob>(&j, 1), pool);
}

class CpuBackend final : public Backend {
 public:
  // Immutable after load.
  struct Weights {
    struct Layer {
      const float* attn_norm = nullptr;  // [d_model]
      WeightView wq;                     // [n_head * head_dim, d_model]
      WeightView wk, wv;                 // [n_head_kv * head_dim, d_model]
      WeightView wo;                     // [d_model, n_head * head_dim]
      const float* bq = nullptr;         // [n_head * head_dim] or null (qwen2)
      const float* bk = nullptr;         // [n_head_kv * head_dim] or null
      const float* bv = nullptr;         // [n_head_kv * head_dim] or null
      const float* q_norm = nullptr;     // [head_dim] or null (qwen3: RMSNorm per head)
      const float* k_norm = nullptr;     // [head_dim] or null
      const float* ffn_norm = nullptr;   // [d_model]
      WeightView w_gate, w_up;           // [d_ff, d_model]
      WeightView w_down;                 // [d_model, d_ff]
    };
    WeightView tok_embd;                 // [n_vocab, d_model]
    std::vector<Layer> layers;           // [n_layer]
    const float* output_norm = nullptr;  // [d_model]
    WeightView output;                   // [n_vocab, d_model] (== tok_embd when tied)
    std::vector<float> rope_freqs;       // [n_rot / 2] frequency divisors, empty = none
    // Storage for tensors not read in place (converted types, random weights), each 64-byte
    // aligned; the views above point into it or into the file mapping.
    std::vector<std::unique_ptr<float[]>> owned_f32;
    std::vector<std::unique_ptr<uint16_t[]>> owned_16;
    // The panel-packed matrices (views with `panels`), in one anonymous mapping with huge pages
    // asked for (madvise), so packing a large model does not take a page fault per 4 KiB.
    std::shared_ptr<void> packed;
    size_t packed_bytes = 0;             // the arena's panels (MemoryInfo::packed_bytes)
    size_t bytes = 0;                    // every distinct tensor, as held
  };

  // Takes the weights (shapes checked by the factory) and sizes the scratch for `s`.
  CpuBackend(const ModelConfig& c, const BackendShape& s, Weights w);

  BackendKind kind() const override { return BackendKind::cpu; }
  ForwardOut forward(const ForwardArgs& a) override;
  MemoryInfo memory() const override;
  std::string device_name() const override { return "CPU"; }
  std::shared_ptr<cpu::ThreadPool> cpu_pool() const override { return pool_; }
  // The LM head (output, or the token embedding when tied) with the arena that keeps it alive,
  // when it was packed in panels; else view.data == nullptr (LlamaModel::packed_lm_head).
  WeightView packed_lm_head(std::shared_ptr<const void>* keep) const {
    if (!w_.output.panels) return {};
    *keep = w_.packed;
    return w_.output;
  }
  // Names the profile's matmul entries with this model's shapes.
  bool set_profile(OpProfile* p) override;

 private:
  // Activations for the largest batch, allocated once (no allocation in the decode loop).
  struct Scratch {
    std::vector<float> x, xb, q, k, v, att, gate, up, logits, att_scores, hidden;
    size_t bytes() const;
  };
  ModelConfig cfg_;
  Weights w_;
  Scratch s_;
  std::shared_ptr<cpu::ThreadPool> pool_;
  cpu::Activations act_ = cpu::Activations::q8;  // BackendShape::activations
  OpProfile* prof_ = nullptr;  // set_profile
  std::vector<cpu::AttentionArgs> att_parts_;  // [n_seq] reserved at load
  cpu::RopeParams rope_;                       // the model's rotary embedding (its factors in w_)
  std::vector<float> rope_cos_, rope_sin_;     // [n_ctx, n_rot / 2] rotation table
  int max_hidden_ = 0;  // hidden-state layers one forward may return (scratch sized for it)
};

}  // namespace specchat
