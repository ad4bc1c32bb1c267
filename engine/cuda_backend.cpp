#include "engine/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend_weights.h"
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

namespace {

constexpr size_t kAlign = 256;  // cudaMalloc's alignment; keeps every region coalescing-friendly
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bump allocator over the pool. With base == nullptr it only measures (the first pass).
struct Carver {
  char* base = nullptr;
  size_t used = 0;
  template <class T>
  T* take(size_t bytes) {
    T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += align_up(bytes);
    return p;
  }
};

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

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

namespace {

using Device = CudaBackend::Device;

// The tensors of a llama model in pool order: token_embd, output_norm, output (absent when
// tied), then per layer attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate,
// ffn_up, ffn_down. dtype is f32 for norms; matrices get `matrix_dtype(name)`.
template <class DtypeOf>
std::vector<DeviceTensor> tensor_list(const ModelConfig& c, bool tied, DtypeOf matrix_dtype) {
  const LlamaTensorShapes sh(c);
  std::vector<DeviceTensor> t;
  auto add = [&](const std::string& name, const std::vector<uint64_t>& ne, bool norm) {
    DeviceTensor d;
    d.name = name;
    d.ne = ne;
    d.norm = norm;
    d.dtype = norm ? DType::f32 : matrix_dtype(name);
    t.push_back(std::move(d));
  };
  add("token_embd.weight", sh.embd, false);
  add("output_norm.weight", sh.norm, true);
  if (!tied) add("output.weight", sh.embd, false);
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = layer_prefix(il);
    add(p + "attn_norm.weight", sh.norm, true);
    add(p + "attn_q.weight", sh.wq, false);
    add(p + "attn_k.weight", sh.wkv, false);
    add(p + "attn_v.weight", sh.wkv, false);
    add(p + "attn_output.weight", sh.wo, false);
    add(p + "ffn_norm.weight", sh.norm, true);
    add(p + "ffn_gate.weight", sh.w_up, false);
    add(p + "ffn_up.weight", sh.w_up, false);
    add(p + "ffn_down.weight", sh.w_down, false);
  }
  return t;
}

// Opens the device, plans and allocates the pool and the pinned staging buffer, and points the
// weight/KV/activation fields into them. Weights are left for the caller to fill.
std::unique_ptr<Device> open_device(const ModelConfig& c, const BackendShape& s,
                                    std::vector<DeviceTensor> tensors, bool tied) {
  std::string why;
  if (!cuda::device_available(&why)) throw ModelError("no CUDA device: " + why);
  int count = 0;
  SPECCHAT_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (s.device < 0 || s.device >= count) {
    throw ModelError("no CUDA device: device " + std::to_string(s.device) + " requested, " +
                     std::to_string(count) + " present");
  }
  if (s.n_ctx > cuda::attention_max_keys(c.head_dim)) {
    throw ModelError("n_ctx " + std::to_string(s.n_ctx) + " exceeds the CUDA attention kernel's limit of " +
                     std::to_string(cuda::attention_max_keys(c.head_dim)) + " keys: use a smaller context");
  }
  auto d = std::make_unique<Device>();
  d->device = s.device;
  SPECCHAT_CUDA_CHECK(cudaSetDevice(s.device));
  d->info = cuda::device_info(s.device);
  SPECCHAT_CUDA_CHECK(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  d->blas = std::make_unique<cuda::Blas>();
  d->blas->set_stream(d->stream);

  const size_t B = static_cast<size_t>(std::max(1, s.max_batch));
  const size_t dm = static_cast<size_t>(c.d_model), hd = static_cast<size_t>(c.head_dim);
  const size_t nq = static_cast<size_t>(c.n_head) * hd, nkv = static_cast<size_t>(c.n_head_kv) * hd;
  const size_t ff = static_cast<size_t>(c.d_ff), nv = static_cast<size_t>(c.n_vocab);
  const size_t n_ctx = static_cast<size_t>(s.n_ctx), nl = static_cast<size_t>(c.n_layer);
  d->tensors = std::move(tensors);
  d->in_capacity = align_up(2 * B * sizeof(int32_t) + B * (n_ctx + B));
  // The scratch for rounding a matmul's input to f16/bf16: the widest n_in of any matrix.
  d->mm_scratch_bytes = cuda::matmul_scratch_bytes(DType::f16, static_cast<int>(B),
                                                   static_cast<int>(std::max({dm, nq, ff})));

  auto carve = [&](Carver& cv) {
    d->weights_bytes = 0;
    for (DeviceTensor& t : d->tensors) {
      t.p = cv.take<void>(t.bytes());
      d->weights_bytes += t.bytes();
    }
    const size_t kv_rows = static_cast<size_t>(std::max(1, s.n_seq)) * nl * n_ctx * nkv;
    d->k_cache = cv.take<float>(kv_rows * sizeof(float));
    d->v_cache = cv.take<float>(kv_rows * sizeof(float));
    d->kv_bytes = 2 * kv_rows * sizeof(float);
    const size_t act0 = cv.used;
    d->x = cv.take<float>(B * dm * sizeof(float));
    d->xb = cv.take<float>(B * dm * sizeof(float));
    d->q = cv.take<float>(B * nq * sizeof(float));
    d->att = cv.take<float>(B * nq * sizeof(float));
    d->gate = cv.take<float>(B * ff * sizeof(float));
    d->up = cv.take<float>(B * ff * sizeof(float));
    d->kbuf = cv.take<float>(B * nkv * sizeof(float));
    d->vbuf = cv.take<float>(B * nkv * sizeof(float));
    d->logits = cv.take<float>(B * nv * sizeof(float));
    d->hidden_bytes = (nl + 1) * B * dm * sizeof(float);
    d->hidden = cv.take<float>(d->hidden_bytes);
    d->mm_scratch = cv.take<void>(d->mm_scratch_bytes);
    d->in_buf = cv.take<void>(d->in_capacity);
    d->path = cv.take<int32_t>(B * sizeof(int32_t));
    d->activation_bytes = cv.used - act0;
  };
  Carver measure;
  carve(measure);
  d->pool_bytes = measure.used;
  d->logits_bytes = B * nv * sizeof(float);
  d->host_bytes = d->in_capacity + d->logits_bytes + d->hidden_bytes;
  size_t free_b = 0, total_b = 0;
  cuda::mem_info(&free_b, &total_b);
  if (d->pool_bytes > free_b) {
    throw ModelError("not enough GPU memory on " + d->info.name + ": the model needs " + gib(d->pool_bytes) +
                     " (weights " + gib(d->weights_bytes) + ", KV cache " + gib(d->kv_bytes) +
                     ", activations " + gib(d->activation_bytes) + "), " + gib(free_b) + " free");
  }
  SPECCHAT_CUDA_CHECK(cudaMalloc(&d->pool, d->pool_bytes));
  void* host = nullptr;
  SPECCHAT_CUDA_CHECK(cudaMallocHost(&host, d->host_bytes));
  d->host = static_cast<char*>(host);
  Carver cut;
  cut.base = static_cast<char*>(d->pool);
  carve(cut);
  // Zeroed like the host cache, so a slot read before it is written gives the same (zero) rows.
  SPECCHAT_CUDA_CHECK(cudaMemsetAsync(d->k_cache, 0, d->kv_bytes / 2, d->stream));
  SPECCHAT_CUDA_CHECK(cudaMemsetAsync(d->v_cache, 0, d->kv_bytes / 2, d->stream));

  // Index the tensors by role.
  size_t i = 0;
  d->tok_embd = &d->tensors[i++];
  d->output_norm = &d->tensors[i++];
  d->output = tied ? d->tok_embd : &d->tensors[i++];
  for (int il = 0; il < c.n_layer; ++il) {
    Device::Layer l{};
    l.attn_norm = &d->tensors[i++];
    l.wq = &d->tensors[i++];
    l.wk = &d->tensors[i++];
    l.wv = &d->tensors[i++];
    l.wo = &d->tensors[i++];
    l.ffn_norm = &d->tensors[i++];
    l.w_gate = &d->tensors[i++];
    l.w_up = &d->tensors[i++];
    l.w_down = &d->tensors[i++];
    d->layers.push_back(l);
  }
  return d;
}

// Uploads one GGUF tensor into its pool region: F16/BF16 and block-type bytes as they are; F32
// matrices rounded to F16 on the host (nearest even); norms as f32.
void upload(const GgufTensorInfo& src, const DeviceTensor& dst) {
  const uint64_t n = src.n_elements();
  if ((dtype_is_block(src.type) && dst.dtype == src.type) || (src.type == GgmlType::f16 && dst.dtype == DType::f16) ||
      (src.type == GgmlType::bf16 && dst.dtype == DType::bf16) ||
      (src.type == GgmlType::f32 && dst.dtype == DType::f32)) {
    SPECCHAT_CUDA_CHECK(cudaMemcpy(dst.p, src.data, dst.bytes(), cudaMemcpyHostToDevice));
    return;
  }
  std::vector<float> f(n);
  dequantize_to_f32(src.type, src.data, f.data(), n);
  if (dst.dtype == DType::f32) {
    SPECCHAT_CUDA_CHECK(cudaMemcpy(dst.p, f.data(), dst.bytes(), cudaMemcpyHostToDevice));
    return;
  }
  std::vector<uint16_t> h(n);
  cpu::convert_from_f32(f.data(), h.data(), dst.dtype, static_cast<int64_t>(n));
  SPECCHAT_CUDA_CHECK(cudaMemcpy(dst.p, h.data(), dst.bytes(), cudaMemcpyHostToDevice));
}

}  // namespace

CudaBackend::CudaBackend(const ModelConfig& c, const BackendShape& s, std::unique_ptr<Device> dev)
    : cfg_(c), shape_(s), d_(std::move(dev)) {
  for (int sq = 0; sq < std::max(1, s.n_seq); ++sq) stores_.push_back(std::make_unique<SeqStore>(*this, sq));
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::device_name() const {
  const cuda::DeviceInfo& i = d_->info;
  return i.name + " (sm_" + std::to_string(i.cc_major) + std::to_string(i.cc_minor) + ", " + gib(i.total_bytes) + ")";
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

std::unique_ptr<Backend> make_cuda_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s) {
  // The CUDA forward is the plain llama layer; refuse what it would silently skip.
  if (!c.plain_llama()) {
    throw ModelError(f.path() + ": the CUDA backend runs only the plain llama layer; this " + c.architecture +
                     " model needs" + (c.qkv_bias ? " Q/K/V biases," : "") + (c.qk_norm ? " Q/K head norms," : "") +
                     (c.rope_freqs ? " rope_freqs," : "") + (c.rope_mode == RopeMode::neox ? " NeoX RoPE," : "") +
                     (c.n_rot() != c.head_dim ? " partial RoPE," : "") +
                     (c.rope_freq_scale != 1.0f ? " scaled RoPE," : "") +
                     (c.n_head * c.head_dim != c.d_model ? " a head width other than d_model / n_head," : "") +
                     " which only the CPU backend has (use --backend cpu)");
  }
  check_tensor_names(f, c);
  const bool tied = f.tensor("output.weight") == nullptr;
  // Matrices keep F16/BF16 and the block types (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K: read by
  // cuda::quant_matmul, rows already checked to be whole blocks by the reader); F32 becomes F16
  // (halves memory and reads per token).
  auto dtype_of = [&](const std::string& name) {
    const GgufTensorInfo* t = f.tensor(name);
    if (t && (t->type == GgmlType::bf16 || dtype_is_block(t->type))) return t->type;
    return DType::f16;
  };
  std::vector<DeviceTensor> list = tensor_list(c, tied, dtype_of);
  // Shapes first (GgufError names the tensor), before any device memory is taken.
  std::vector<const GgufTensorInfo*> src;
  try {
    for (const DeviceTensor& t : list) src.push_back(&f.require_tensor(t.name, t.ne));
  } catch (const GgufError& e) {
    throw ModelError(std::string(e.what()));
  }
  try {
    std::unique_ptr<Device> d = open_device(c, s, std::move(list), tied);
    for (size_t i = 0; i < d->tensors.size(); ++i) upload(*src[i], d->tensors[i]);
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(d->stream));
    return std::make_unique<CudaBackend>(c, s, std::move(d));
  } catch (const cuda::CudaError& e) {
    throw BackendError(std::string("CUDA load failed: ") + e.what());
  }
}

std::unique_ptr<Backend> make_cuda_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed,
                                                  const RandomMatrixType& matrix_type) {
  std::vector<DeviceTensor> list = tensor_list(c, false, [](const std::string&) { return DType::f16; });
  if (matrix_type) {
    for (DeviceTensor& t : list) {
      if (!t.norm) t.dtype = matrix_type(t.name, t.ne);
    }
  }
  try {
    std::unique_ptr<Device> d = open_device(c, s, std::move(list), false);
    const std::vector<float> ones(static_cast<size_t>(c.d_model), 1.0f);
    for (size_t i = 0; i < d->tensors.size(); ++i) {
      const DeviceTensor& t = d->tensors[i];
      if (t.norm) {
        SPECCHAT_CUDA_CHECK(cudaMemcpy(t.p, ones.data(), t.bytes(), cudaMemcpyHostToDevice));
        continue;
      }
      if (dtype_is_block(t.dtype)) {
        cuda::random_fill_blocks(t.p, t.dtype, static_cast<int64_t>(t.n_elements()), random_tensor_seed(seed, i),
                                 random_tensor_amplitude(t.ne[0]), d->stream);
        continue;
      }
      // Same values as make_cpu_backend_random (the CPU twin of random_fill is bit-identical).
      cuda::random_fill(t.p, t.dtype, static_cast<int64_t>(t.n_elements()), random_tensor_seed(seed, i),
                        random_tensor_amplitude(t.ne[0]), d->stream);
    }
    SPECCHAT_CUDA_CHECK(cudaStreamSynchronize(d->stream));
    return std::make_unique<CudaBackend>(c, s, std::move(d));
  } catch (const cuda::CudaError& e) {
    throw BackendError(std::string("CUDA load failed: ") + e.what());
  }
}

}  // namespace specchat
