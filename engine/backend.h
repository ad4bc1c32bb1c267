// Backend: where a model's weights, KV rows and activations live and how one forward runs.
// LlamaModel (model.h) validates a Batch, keeps the cache bookkeeping (KvCache: committed ids,
// slot links) and builds the tree mask on the host; a Backend runs the layers. Two exist:
//   CpuBackend  (cpu_backend.h)  weights in their file type, read from the mapping; the reference.
//   CudaBackend (cuda_backend.h) weights in their file dtype on one GPU, one device pool.
// This header compiles without nvcc and without CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/model_config.h"
#include "kernels/cpu/linear.h"

namespace specchat {

namespace cpu {
class ThreadPool;
}
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
  size_t weights_bytes = 0;     // weight tensors as held (file type: mapped on the CPU, uploaded on CUDA)
  size_t kv_bytes = 0;          // K and V rows: n_seq · 2 · n_layer · n_ctx · kv_dim · (2 for f16, 4 for f32)
  DType kv_type = DType::f32;   // element type of the K/V rows in use
  // True when the matrix products round activations to 8 bits for some weight (the CPU backend's
  // integer path on block-type weights, cpu::Activations::q8).
  bool q8_activations = false;
  size_t activation_bytes = 0;  // scratch sized for max_batch (incl. mask and logits buffers)
  // CPU: bytes of 16-bit matrices repacked into panels at load (private memory, not shared with
  // the page cache; 0 when SPECCHAT_CPU_PACK=0 or the panels would not fit in memory).
  size_t packed_bytes = 0;
  size_t device_used_bytes = 0;   // cudaMemGetInfo total − free (whole device, all processes)
  size_t device_total_bytes = 0;  // cudaMemGetInfo total
  bool on_device = false;
};

// Sizes fixed at load; every buffer a forward needs is allocated from them up front.
struct BackendShape {
  int n_ctx = 0;      // KV cache slots per sequence
  int n_seq = 1;      // sequences in the KV pool (a device backend allocates n_seq × n_ctx slots)
  int max_batch = 0;  // most tokens in one forward
  int n_threads = 0;  // CPU threads (0 = all cores); ignored by CUDA
  int device = 0;     // CUDA device ordinal; ignored by the CPU
  // The CPU kernels' thread pool, shared by the models of one engine (null: the CPU backend
  // makes its own with n_threads); ignored by CUDA.
  std::shared_ptr<cpu::ThreadPool> pool;
  // Block-type matrices on the CPU: activations rounded to 8 bits (integer dot products) or
  // kept in f32 (cpu::Activations, kernels/cpu/linear.h); ignored by CUDA (f32 activations).
  cpu::Activations activations = cpu::Activations::q8;
};

// One sequence's part of a forward: rows [row0, row0 + n_rows) of the batch, all of sequence
// `seq` (a slot of the model's sequence pool, [0, n_seq)). Row row0 + i has its K/V written to
// that sequence's slot kv_pos0 + i. It attends to the sequence's slots [0, n_prefix) and to
// slot n_prefix + j when visible[i * n_masked + j] != 0 (n_masked = kv_pos0 + n_rows − n_prefix):
// the tree mask LlamaModel built from parent links. Nothing of another sequence is visible.
struct SeqSegment {
  int seq = 0;
  int row0 = 0, n_rows = 0;
  int kv_pos0 = 0;
  int n_prefix = 0;
  int n_masked = 0;
  const uint8_t* visible = nullptr;  // [n_rows, n_masked]
  KvCache* kv = nullptr;             // the sequence's cache (host rows on the CPU backend)
};

// Hidden-state index meaning "the final norm's output" (the LM head's input).
constexpr int kHiddenFinalNorm = -1;

// One validated forward over rows of one or more sequences. Arrays are [n_tokens] unless
// stated. Segments are contiguous, in row order, and cover every row once.
// Preconditions (checked by LlamaModel::forward): 0 < n_tokens <= max_batch, token ids in
// [0, n_vocab), each segment fits its sequence's n_ctx, out_rows in [0, n_tokens).
struct ForwardArgs {
  std::span<const int32_t> tokens;
  // [n_tokens, d_model] input embeddings replacing the token lookup, or empty (Batch::embd).
  std::span<const float> embd;
  std::span<const int32_t> pos;
  std::span<const int32_t> out_rows;  // [n_out] rows whose logits are returned, in this order
  std::span<const SeqSegment> segments;
  // Layers whose output (the residual stream after layer il, il in [0, n_layer)) or
  // kHiddenFinalNorm is returned for the hidden rows, in this order. Empty = none.
  std::span<const int32_t> hidden_layers;
  // [n_hid] rows whose hidden states are returned, in this order; empty = the out_rows. With
  // explicit rows only layer ids (not kHiddenFinalNorm, computed for out rows) may be asked
  // (std::invalid_argument). Lets a caller take every row's hidden state and one row's logits.
  std::span<const int32_t> hidden_rows;
};

// What a forward returns, in HOST memory, valid until the next forward.
struct ForwardOut {
  std::span<const float> logits;  // [n_out, n_vocab]
  std::span<const float> hidden;  // [n_hidden_layers, n_hid, d_model] (n_hid: hidden_rows, else n_out)
};

struct OpProfile;  // engine/op_profile.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual BackendKind kind() const = 0;

  // Runs the layers over every row of every segment, writes each row's K/V into its sequence's
  // slots (host rows of the segment's KvCache on the CPU; the backend's own rows on a device)
  // and returns logits [n_out, n_vocab] and the requested hidden states. Device failures throw
  // BackendError (a ModelError).
  virtual ForwardOut forward(const ForwardArgs& a) = 0;

  // Where sequence `seq`'s K/V rows live when not in its KvCache's host arrays (nullptr: host
  // rows). A KvCache built with this store moves rows through it (keep_path).
  virtual KvRowStore* row_store(int /*seq*/) { return nullptr; }

  // Per-component bytes (kv_bytes: every sequence's cache, summed by the caller on the CPU).
  virtual MemoryInfo memory() const = 0;

  // Human-readable device name ("CPU", "NVIDIA H200 (sm_90, 139.8 GiB)").
  virtual std::string device_name() const = 0;

  // The CPU kernels' thread pool this backend runs on (nullptr on a device backend), so that
  // drafters running beside the model share it instead of starting a second pool on the same
  // cores (TRAINING-NOTES "thread pools fight").
  virtual std::shared_ptr<cpu::ThreadPool> cpu_pool() const { return nullptr; }

  // Records the time of each operation of later forwards into `p` (op_profile.h; null = stop).
  // Returns false when this backend cannot profile (device backends: kernels run asynchronously).
  virtual bool set_profile(OpProfile* /*p*/) { return false; }
};

// Factories. CUDA copies what it keeps, so `f` must stay alive for the call only; the CPU
// backend keeps typed views into f's mapping, so `f` must outlive it (LlamaModel owns both).
// Throw ModelError (tensor missing / wrong shape / no device) or BackendError (device failure).
std::unique_ptr<Backend> make_cpu_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s);
std::unique_ptr<Backend> make_cuda_backend(const GgufFile& f, const ModelConfig& c, const BackendShape& s);
// Random weights for benchmarks (no file): matrices uniform in ±1/sqrt(n_in) stored as F16
// (keeps activations O(1) through the layers), norm weights 1; untied output. Deterministic in
// `seed`, and the same model on both backends (backend_weights.h: random_tensor_seed).
std::unique_ptr<Backend> make_cpu_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed);
// `matrix_type` (CUDA only; empty = F16 everywhere) gives each matrix's type from its GGUF name
// and shape (ne innermost first), e.g. quant_tensor_type of a preset: block-type matrices are
// filled by cuda::random_fill_blocks (random bytes, fixed scales: for speed measurements only).
using RandomMatrixType = std::function<DType(const std::string& name, const std::vector<uint64_t>& ne)>;
std::unique_ptr<Backend> make_cuda_backend_random(const ModelConfig& c, const BackendShape& s, uint64_t seed,
                                                  const RandomMatrixType& matrix_type = {});

}  // namespace specchat
