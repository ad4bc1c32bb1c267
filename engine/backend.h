// Backend: where a model's weights, KV rows and activations live and how one forward runs.
// LlamaModel (model.h) validates a Batch, keeps the cache bookkeeping (KvCache: committed ids,
// slot links) and builds the tree mask on the host; a Backend runs the layers. Two exist:
//   CpuBackend  (cpu_backend.h)  f32 weights in RAM, OpenBLAS; the reference and the oracle.
//   CudaBackend (cuda_backend.h) weights in their file dtype on one GPU, one device pool.
// This header compiles without nvcc and without CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "engine/kv_cache.h"
#include "engine/model_config.h"

namespace specchat {

class GgufFile;

// Thrown when a file parses as GGUF but is not a usable model (wrong architecture, tensor
// missing or of the wrong shape), or when a backend cannot hold it (no CUDA device, out of
// device memory). GgufError covers malformed files.
class ModelError : public std::runtime_error {
 public:
  explicit ModelError(const std::string& m) : std::runtime_error(m) {}
};

// A device call failed during load or a forward (the message names the call, file and line).
// The model's state is undefined afterwards: reload it.
class BackendError : public ModelError {
 public:
  explicit BackendError(const std::string& m) : ModelError(m) {}
};

enum class BackendKind { cpu, cuda };

// "cpu" / "cuda".
const char* backend_name(BackendKind k);
// Parses "cpu" / "cuda"; throws std::invalid_argument naming the value otherwise.
BackendKind parse_backend(const std::string& s);
// True when this build has the CUDA backend compiled in (SPECCHAT_CUDA=ON). Says nothing about
// whether a device is present: loading with BackendKind::cuda throws ModelError when none is.
bool cuda_backend_compiled();

// Bytes a model holds, per component. Host bytes on the CPU backend; device bytes on CUDA.
struct MemoryInfo {
  size_t weights_bytes = 0;     // weight tensors as held (f32 on CPU; file dtype on CUDA)
  size_t kv_bytes = 0;          // K and V rows: 2 · n_layer · n_ctx · kv_dim · 4
  size_t activation_bytes = 0;  // scratch sized for max_batch (incl. mask and logits buffers)
  size_t device_used_bytes = 0;   // cudaMemGetInfo total − free (whole device, all processes)
  size_t device_total_bytes = 0;  // cudaMemGetInfo total
  bool on_device = false;
};

// Sizes fixed at load; every buffer a forward needs is allocated from them up front.
struct BackendShape {
  int n_ctx = 0;      // KV cache slots
  int max_batch = 0;  // most tokens in one forward
  int n_threads = 0;  // CPU threads (0 = all cores); ignored by CUDA
  int device = 0;     // CUDA device ordinal; ignored by the CPU
};

// One validated forward. Arrays are [n_tokens] unless stated.
// Token i has RoPE position pos[i] and its K/V rows go to slot kv_pos0 + i. It attends to slots
// [0, n_prefix) and to slot n_prefix + j when visible[i * n_masked + j] != 0
// (n_masked = kv_pos0 + n_tokens − n_prefix): the mask LlamaModel built from parent links.
// Preconditions (checked by LlamaModel::forward): 0 < n_tokens <= max_batch, token ids in
// [0, n_vocab), kv_pos0 + n_tokens <= n_ctx, out_rows in [0, n_tokens).
struct ForwardArgs {
  std::span<const int32_t> tokens;
  std::span<const int32_t> pos;
  std::span<const int32_t> out_rows;  // [n_out] rows whose logits are returned, in this order
  int kv_pos0 = 0;
  int n_prefix = 0;
  int n_masked = 0;
  const uint8_t* visible = nullptr;   // [n_tokens, n_masked]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // Runs the layers, writes the batch's K/V rows into slots kv_pos0 .. kv_pos0 + n_tokens − 1
  // (host rows of `kv` on the CPU; the backend's own rows on a device) and returns logits
  // [n_out, n_vocab] in HOST memory, valid until the next forward. Device failures throw
  // BackendError (a ModelError).
  virtual std::span<const float> forward(const ForwardArgs& a, KvCache& kv) = 0;

  // Where K/V rows live when not in the KvCache's host arrays (nullptr: host rows). A KvCache
  // built with this store moves rows through it (keep_path).
  virtual KvRowStore* row_store() { return nullptr; }

  // Per-component bytes (kv: the cache that forward writes).
  virtual MemoryInfo memory(const KvCache& kv) const = 0;

  // Human-readable device name ("CPU", "NVIDIA H200 (sm_90, 139.8 GiB)").
  virtual std::string device_name() const = 0;
};

// Factories. Weights: `f` must stay alive for the call only (backends copy what they keep).
// Throw ModelError (tensor missing / wrong shape / no device) or BackendError (device failure).
std::unique_ptr<Backend> make_cpu_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s);
std::unique_ptr<Backend> make_cuda_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s);
// Random weights for benchmarks (no file): matrices uniform in ±1/sqrt(n_in) rounded to F16
// (keeps activations O(1) through the layers), norm weights 1; untied output. Deterministic in
// `seed`, and the same model on both backends (backend_weights.h: random_tensor_seed).
std::unique_ptr<Backend> make_cpu_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed);
std::unique_ptr<Backend> make_cuda_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed);

}  // namespace specchat
