// The CUDA backend's load paths: the pool plan and allocation (open_device), the upload of a
// GGUF model's tensors in their file type, and random models made on the device.
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

}  // namespace

std::string cuda_gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

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
    throw ModelError("not enough GPU memory on " + d->info.name + ": the model needs " + cuda_gib(d->pool_bytes) +
                     " (weights " + cuda_gib(d->weights_bytes) + ", KV cache " + cuda_gib(d->kv_bytes) +
                     ", activations " + cuda_gib(d->activation_bytes) + "), " + cuda_gib(free_b) + " free");
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
