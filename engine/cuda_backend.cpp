#include "engine/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend_weights.h"
#include "engine/cuda_device.h"
#include "engine/gguf.h"
#include "engine/op_profile.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/kv_compact.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/kv_compact.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/quant.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"

namespace specchat {

using Device = CudaBackend::Device;

CudaBackend::CudaBackend(const ModelConfig& c, const BackendShape& s, std::unique_ptr<Device> dev)
    : cfg_(c), shape_(s), d_(std::move(dev)) {
  for (int sq = 0; sq < std::max(1, s.n_seq); ++sq) stores_.push_back(std::make_unique<SeqStore>(*this, sq));
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::device_name() const {
  const cuda::DeviceInfo& i = d_->info;
  return i.name + " (sm_" + std::to_string(i.cc_major) + std::to_string(i.cc_minor) + ", " + cuda_gib(i.total_bytes) + ")";
}

size_t CudaBackend::SeqStore::bytes() const { return b_.d_->kv_bytes / static_cast<size_t>(std::max(1, b_.shape_.n_seq)); }

void CudaBackend::SeqStore::compact(std::span<const int32_t> src_slots, int dst0) { b_.compact(seq_, src_slots, dst0); }

KvRowStore* CudaBackend::row_store(int seq) {
  return seq >= 0 && seq < static_cast<int>(stores_.size()) ? stores_[static_cast<size_t>(seq)].get() : nullptr;
}

bool CudaBackend::set_profile(OpProfile* p) {
  prof_ = p;
  if (p) name_profile_ops(*p, cfg_);
  return true;
}

MemoryInfo CudaBackend::memory() const {
  MemoryInfo m;
  m.on_device = true;
  m.weights_bytes = d_->weights_bytes;
  m.kv_bytes = d_->kv_bytes;
  m.activation_bytes = d_->activation_bytes;
  // The live panel polls this: a failed query reports 0 rather than failing the caller.
  try {
    SPECCHAT_CUDA_CHECK(cudaSetDevice(d_->device));
    size_t free_b = 0, total_b = 0;
    cuda::mem_info(&free_b, &total_b);
    m.device_total_bytes = total_b;
    m.device_used_bytes = total_b - free_b;
  } catch (const cuda::CudaError&) {
  }
  return m;
}

ForwardOut CudaBackend::forward(const ForwardArgs& a) {
  Device& d = *d_;
  const ModelConfig& c = cfg_;
  const int n = static_cast<int>(a.tokens.size());
  const int n_out = static_cast<int>(a.out_rows.size());
  const int n_hidden = static_cast<int>(a.hidden_layers.size());
  const int dm = c.d_model, hd = c.head_dim, nq = c.n_head * hd, nkv = c.n_head_kv * hd;
  const int ff = c.d_ff, nv = c.n_vocab;
  if (n_hidden > c.n_layer + 1) throw std::invalid_argument("forward: too many hidden-state layers requested");
  const std::span<const int32_t> hrows = a.hidden_rows.empty() ? a.out_rows : a.hidden_rows;
  const int n_hid = static_cast<int>(hrows.size());
  if (!a.hidden_rows.empty() &&
      std::find(a.hidden_layers.begin(), a.hidden_layers.end(), kHiddenFinalNorm) != a.hidden_layers.end()) {
    throw std::invalid_argument("forward: the final norm's output is returned for out rows only");
  }
  const size_t layer_stride = static_cast<size_t>(shape_.n_ctx) * nkv;
  const size_t seq_stride = static_cast<size_t>(c.n_layer) * layer_stride;
  try {
    SPECCHAT_CUDA_CHECK(cudaSetDevice(d.device));
    cudaStream_t st = d.stream;
    // Profiling: mark(op) records an event closing operation op (the time since the previous
    // mark); nothing happens without a profile.
    OpProfile* const P = prof_;
    size_t n_marks = 0;
    auto mark = [&](int op) {
      if (!P) return;
      if (n_marks == d.prof_events.size()) {
        cudaEvent_t e = nullptr;
        SPECCHAT_CUDA_CHECK(cudaEventCreate(&e));
        d.prof_events.push_back(e);
        d.prof_ops.push_back(op);
      }
      d.prof_ops[n_marks] = op;
      SPECCHAT_CUDA_CHECK(cudaEventRecord(d.prof_events[n_marks], st));
      ++n_marks;
    };
    mark(-1);  // start
    // Inputs: ids, pos and every segment's mask packed in the pinned buffer, one copy up.
    size_t mask_bytes = 0;
    for (const SeqSegment& sg : a.segments) mask_bytes += static_cast<size_t>(sg.n_rows) * static_cast<size_t>(sg.n_masked);
    const size_t in_bytes = 2 * static_cast<size_t>(n) * sizeof(int32_t) + mask_bytes;
    int32_t* h_ids = reinterpret_cast<int32_t*>(d.host);
    std::memcpy(h_ids, a.tokens.data(), static_cast<size_t>(n) * sizeof(int32_t));
    std::memcpy(h_ids + n, a.pos.data(), static_cast<size_t>(n) * sizeof(int32_t));
    {
      uint8_t* m = reinterpret_cast<uint8_t*>(h_ids + 2 * n);
      for (const SeqSegment& sg : a.segments) {
        const size_t nb = static_cast<size_t>(sg.n_rows) * static_cast<size_t>(sg.n_masked);
        std::memcpy(m, sg.visible, nb);
        m += nb;
      }
    }
    SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(d.in_buf, d.host, in_bytes, cudaMemcpyHostToDevice, st));
    const int32_t* ids = static_cast<const int32_t*>(d.in_buf);
    const int32_t* pos = ids + n;
    const uint8_t* vis0 = reinterpret_cast<const uint8_t*>(ids + 2 * n);

    auto mm = [&](const float* x, const DeviceTensor* w, float* y, int rows, int n_in, int n_o) {
      if (dtype_is_block(w->dtype)) {  // dequantize-and-dot in registers (kernels/cuda/quant.h)
        cuda::quant_matmul(x, w->p, w->dtype, y, rows, n_in, n_o, st);
        return;
      }
      cuda::matmul(*d.blas, x, w->p, w->dtype, y, rows, n_in, n_o, d.mm_scratch, d.mm_scratch_bytes, st);
    };
    // Hidden rows of layer il (or the final norm, from `src` already gathered by out row).
    auto save_hidden = [&](int il, const float* src, bool gathered) {
      for (int h = 0; h < n_hidden; ++h) {
        if (a.hidden_layers[static_cast<size_t>(h)] != il) continue;
        float* dst = d.hidden + static_cast<size_t>(h) * n_hid * dm;
        for (int j = 0; j < n_hid; ++j) {
          const size_t r = gathered ? static_cast<size_t>(j) : static_cast<size_t>(hrows[static_cast<size_t>(j)]);
          SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(dst + static_cast<size_t>(j) * dm, src + r * dm, sizeof(float) * dm,
                                              cudaMemcpyDeviceToDevice, st));
        }
      }
    };
    if (a.embd.empty()) {
      cuda::embedding_gather(d.tok_embd->p, d.tok_embd->dtype, ids, d.x, n, dm, st);
    } else {  // input embeddings (PIPO latents): pageable copy, ordered on the stream
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(d.x, a.embd.data(), a.embd.size() * sizeof(float), cudaMemcpyHostToDevice, st));
    }
    mark(OpProfile::embed);  // with the input upload
    for (int il = 0; il < c.n_layer; ++il) {
      const Device::Layer& l = d.layers[static_cast<size_t>(il)];
      cuda::rmsnorm(d.x, static_cast<const float*>(l.attn_norm->p), d.xb, n, dm, c.norm_eps, st);
      mark(OpProfile::norm);
      mm(d.xb, l.wq, d.q, n, dm, nq);
      mm(d.xb, l.wk, d.kbuf, n, dm, nkv);
      mm(d.xb, l.wv, d.vbuf, n, dm, nkv);
      mark(OpProfile::matmul_qkv);
      cuda::rope(d.q, pos, n, c.n_head, hd, c.rope_theta, st);
      cuda::rope(d.kbuf, pos, n, c.n_head_kv, hd, c.rope_theta, st);
      mark(OpProfile::rope);
      // Per sequence: its rows (contiguous slots) into its cache, then attention over its own
      // slots only.
      const uint8_t* vis = vis0;
      for (const SeqSegment& sg : a.segments) {
        float* kl = d.k_cache + static_cast<size_t>(sg.seq) * seq_stride + static_cast<size_t>(il) * layer_stride;
        float* vl = d.v_cache + static_cast<size_t>(sg.seq) * seq_stride + static_cast<size_t>(il) * layer_stride;
        const size_t rows_bytes = static_cast<size_t>(sg.n_rows) * nkv * sizeof(float);
        SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(kl + static_cast<size_t>(sg.kv_pos0) * nkv,
                                            d.kbuf + static_cast<size_t>(sg.row0) * nkv, rows_bytes,
                                            cudaMemcpyDeviceToDevice, st));
        SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(vl + static_cast<size_t>(sg.kv_pos0) * nkv,
                                            d.vbuf + static_cast<size_t>(sg.row0) * nkv, rows_bytes,
                                            cudaMemcpyDeviceToDevice, st));
        mark(OpProfile::kv_write);
        cuda::AttentionArgs at{};
        at.q = d.q + static_cast<size_t>(sg.row0) * nq;
        at.k_cache = kl;
        at.v_cache = vl;
        at.kv_stride = nkv;
        at.kv_pos0 = sg.kv_pos0;
        at.n_prefix = sg.n_prefix;
        at.n_tokens = sg.n_rows;
        at.n_head = c.n_head;
        at.n_head_kv = c.n_head_kv;
        at.head_dim = hd;
        at.visible = vis;
        at.out = d.att + static_cast<size_t>(sg.row0) * nq;
        at.scratch = nullptr;
        cuda::attention(at, st);
        mark(OpProfile::attention);
        vis += static_cast<size_t>(sg.n_rows) * static_cast<size_t>(sg.n_masked);
      }
      mm(d.att, l.wo, d.xb, n, nq, dm);
      mark(OpProfile::matmul_o);
      cuda::add_inplace(d.x, d.xb, static_cast<int64_t>(n) * dm, st);
      mark(OpProfile::residual);
      cuda::rmsnorm(d.x, static_cast<const float*>(l.ffn_norm->p), d.xb, n, dm, c.norm_eps, st);
      mark(OpProfile::norm);
      mm(d.xb, l.w_gate, d.gate, n, dm, ff);
      mm(d.xb, l.w_up, d.up, n, dm, ff);
      mark(OpProfile::matmul_gate_up);
      cuda::swiglu(d.gate, d.up, d.gate, static_cast<int64_t>(n) * ff, st);
      mark(OpProfile::swiglu);
      mm(d.gate, l.w_down, d.xb, n, ff, dm);
      mark(OpProfile::matmul_down);
      cuda::add_inplace(d.x, d.xb, static_cast<int64_t>(n) * dm, st);
      mark(OpProfile::residual);
      if (n_hidden > 0) {
        save_hidden(il, d.x, false);
        mark(OpProfile::hidden_copy);
      }
    }
    // Final norm and output projection only for the requested rows; a contiguous run of rows
    // (the usual case: all rows, or the last) is one launch.
    float* h_logits = d.host_logits();
    float* h_hidden = d.host_hidden();
    if (n_out > 0) {
      const float* onorm = static_cast<const float*>(d.output_norm->p);
      bool contiguous = true;
      for (int j = 1; j < n_out; ++j) contiguous = contiguous && a.out_rows[static_cast<size_t>(j)] == a.out_rows[0] + j;
      if (contiguous) {
        cuda::rmsnorm(d.x + static_cast<size_t>(a.out_rows[0]) * dm, onorm, d.xb, n_out, dm, c.norm_eps, st);
      } else {
        for (int j = 0; j < n_out; ++j) {
          cuda::rmsnorm(d.x + static_cast<size_t>(a.out_rows[static_cast<size_t>(j)]) * dm, onorm,
                        d.xb + static_cast<size_t>(j) * dm, 1, dm, c.norm_eps, st);
        }
      }
      mark(OpProfile::norm);
      if (n_hidden > 0) {
        save_hidden(kHiddenFinalNorm, d.xb, true);
        mark(OpProfile::hidden_copy);
      }
      mm(d.xb, d.output, d.logits, n_out, dm, nv);
      mark(OpProfile::matmul_head);
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(h_logits, d.logits, static_cast<size_t>(n_out) * nv * sizeof(float),
                                          cudaMemcpyDeviceToHost, st));
    }
    if (n_hidden > 0 && n_hid > 0) {
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(h_hidden, d.hidden, static_cast<size_t>(n_hidden) * n_hid * dm * sizeof(float),
                                          cudaMemcpyDeviceToHost, st));
    }
    mark(OpProfile::copy_out);
    // Also guards the pinned staging buffer: the next forward may overwrite it.
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(st));
    if (P) {
      for (size_t i = 1; i < n_marks; ++i) {
        float ms = 0.0f;
        SPECCHAT_CUDA_CHECK(cudaEventElapsedTime(&ms, d.prof_events[i - 1], d.prof_events[i]));
        P->add(static_cast<OpProfile::Op>(d.prof_ops[i]), static_cast<double>(ms));
      }
      ++P->forwards;
      P->rows += n;
    }
    ForwardOut out;
    out.logits = {h_logits, static_cast<size_t>(n_out) * nv};
    out.hidden = {h_hidden, static_cast<size_t>(n_hidden) * n_hid * dm};
    return out;
  } catch (const cuda::CudaError& e) {
    throw BackendError(std::string("CUDA forward failed: ") + e.what());
  }
}

void CudaBackend::compact(int seq, std::span<const int32_t> src_slots, int dst0) {
  Device& d = *d_;
  const int nkv = cfg_.n_head_kv * cfg_.head_dim;
  const int64_t layer_stride = static_cast<int64_t>(shape_.n_ctx) * nkv;
  const size_t seq_off = static_cast<size_t>(seq) * static_cast<size_t>(cfg_.n_layer) * static_cast<size_t>(layer_stride);
  const int n = static_cast<int>(src_slots.size());
  cpu::check_kv_path(src_slots.data(), n, dst0);
  const int B = std::max(1, shape_.max_batch);
  try {
    SPECCHAT_CUDA_CHECK(cudaSetDevice(d.device));
    // Chunks of max_batch applied in order are the same as one in-order pass.
    for (int c0 = 0; c0 < n; c0 += B) {
      const int m = std::min(B, n - c0);
      std::memcpy(d.host, src_slots.data() + c0, static_cast<size_t>(m) * sizeof(int32_t));
      SPECCHAT_CUDA_CHECK(cudaMemcpyAsync(d.path, d.host, static_cast<size_t>(m) * sizeof(int32_t),
                                          cudaMemcpyHostToDevice, d.stream));
      cuda::kv_compact(d.k_cache + seq_off, cfg_.n_layer, layer_stride, nkv, nkv, d.path, m, dst0 + c0, d.stream);
      cuda::kv_compact(d.v_cache + seq_off, cfg_.n_layer, layer_stride, nkv, nkv, d.path, m, dst0 + c0, d.stream);
      SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(d.stream));  // before the staging is reused
    }
  } catch (const cuda::CudaError& e) {
    throw BackendError(std::string("CUDA KV compaction failed: ") + e.what());
  }
}

}  // namespace specchat
