// A loaded model of a supported architecture (llama, qwen2, qwen3: architecture.h): immutable weights (a Backend: CPU views into the file
// mapping, or CUDA), the vocabulary, and a pool of n_seq KV caches sized at load, one per
// sequence. One forward runs rows of several sequences together (each row sees only its own
// sequence's slots), with explicit positions and tree/causal masking, and returns logits and,
// on request, hidden states. The mask is built here, on the host, for every backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/gguf.h"
#include "engine/kv_cache.h"
#include "engine/model_config.h"
#include "engine/panel_arena.h"
#include "engine/quantize.h"
#include "engine/vocab.h"

namespace specchat {

// One forward's input. All arrays are [n_tokens].
// Token i is written to KV slot kv_pos0 + i and has RoPE position pos[i]. It attends to the
// shared prefix, cache slots [0, n_prefix), and to its ancestors and itself (tree attention,
// SpecInfer §4 / Medusa §2.3). Ancestors are given by parent[i]: a batch index < i, or −1 for
// "no parent in this batch"; in the latter case parent_slot[i] (when given) names an absolute
// cache slot in [n_prefix, kv_pos0) written by an earlier forward, whose own ancestors are
// followed through the cache's slot links. A chain has parent[i] = i − 1.
struct Batch {
  int seq = 0;                       // the sequence (KV pool slot, [0, n_seq)) these rows belong to
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> parent;
  std::vector<int32_t> parent_slot;  // optional, [n_tokens], −1 = none
  int kv_pos0 = 0;
  int n_prefix = -1;                 // −1 = kv_pos0 (everything before the batch is shared)
  // Rows whose logits are returned, in this order (e.g. all rows when verifying a draft,
  // only the last when prefilling).
  std::vector<int32_t> out_rows;
  // Optional input embeddings [n_tokens, d_model] that replace the token-embedding lookup
  // (PIPO's compressed pair latents, docs/design/pipo.md). Empty = look up `tokens`. Either
  // every batch of one forward has them or none does; `tokens` must still hold valid ids (the
  // cache records them as the rows' committed ids).
  std::vector<float> embd;
  // Optional rows (batch indices) whose hidden states forward() returns instead of out_rows'
  // (e.g. every row's hidden state, the last row's logits). Empty = out_rows.
  std::vector<int32_t> hidden_rows;

  // A causal chain of `toks` starting at position/slot `start`; returns logits for every row
  // when `all_logits`, else only the last row.
  static Batch chain(std::span<const int32_t> toks, int start, bool all_logits);
};

class LlamaModel {
 public:
  struct Options {
    int n_ctx = 0;      // KV cache length in tokens per sequence; 0 = the model's n_ctx_train
    int n_seq = 1;      // sequences in the KV pool (each gets n_ctx slots, allocated at load)
    int max_batch = 128;  // largest Batch the forward accepts (scratch is sized up front)
    int n_threads = 0;  // BLAS / op threads; 0 = all cores
    BackendKind backend = BackendKind::cpu;  // where weights, KV rows and the forward live
    int device = 0;     // CUDA device ordinal (backend == cuda)
    // CPU kernels' thread pool shared with other models (ModelPair shares one between target
    // and draft); null = the model makes its own with n_threads.
    std::shared_ptr<cpu::ThreadPool> pool;
    // Accept a PIPO backbone (a file with a `pipo.role` key, docs/design/pipo.md). Only the
    // PIPO loader sets this: run on tokens instead of pair latents a backbone produces
    // fluent-looking nonsense, so a plain load refuses it (ModelError naming the release).
    bool pipo_backbone = false;
    // Element type of the KV cache rows (f16 or f32; anything else: ModelError). f16 halves the
    // cache and the bytes attention reads; f32 keeps the rows as computed (conformance tests
    // against f32 references use it). The CUDA backend keeps f32 rows whatever this says (its
    // attention kernel reads f32); MemoryInfo::kv_type tells which is in use.
    DType kv_type = DType::f16;
    // Block-type matrices (Q8_0, Q4_K, …) on the CPU: q8 rounds each activation row to 8 bits per
    // block of 32 (per 256 for Q4_K, Q5_K and Q6_K) and multiplies in integers (llama.cpp's error
    // class, 1–2e-2 normalized; decode near the memory-bandwidth limit); f32 keeps activations unrounded (the strict 1e-3 tier,
    // slower). F16/BF16/F32 weights and the CUDA backend always keep f32 activations.
    // MemoryInfo::q8_activations tells whether rounding happens.
    cpu::Activations activations = cpu::Activations::q8;
  };

  // Loads a GGUF file. CPU: matrices of every type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K,
  // Q6_K) are read in place from the mapping (kept open by the model).
  // CUDA: F16/BF16 and block-type matrices are uploaded as they are, F32 ones converted to F16.
  // Throws GgufError (malformed file, names the file), ModelError (an architecture, hyper-parameter
  // key or tensor SpecChat does not run, named; <arch>.vocab_size disagreeing with the vocabulary; with
  // backend cuda: "no CUDA device: <why>" or out of device memory), VocabError (no usable
  // vocabulary).
  static std::unique_ptr<LlamaModel> load(const std::string& path, const Options& opt);
  static std::unique_ptr<LlamaModel> load(const std::string& path) { return load(path, Options{}); }

  // A model with random weights and a synthetic vocabulary (pieces "<unk>", "<s>", "</s>",
  // then "t3", "t4", …; bos 1, eos 2), for benchmarks and tests that need a shape, not a file
  // (e.g. 7B: d_model 4096, 32 layers, 32 heads, d_ff 11008, vocab 32000). On CUDA the weights
  // are F16 generated on the device (nothing crosses PCIe); on the CPU f32 from a host RNG.
  // cfg.head_dim 0 = d_model / n_head; cfg.n_head_kv 0 = n_head; n_ctx from opt.n_ctx, else
  // cfg.n_ctx_train. `quant` (CUDA only): matrices in the types a GGUF quantized with that preset
  // would have (quant_tensor_type), random bytes with fixed block scales: a model of the right
  // size and layout for speed measurements, not for output quality. Throws ModelError for an
  // inconsistent config or `quant` on the CPU backend (there: quantize a file made by
  // scripts/make-random-gguf with specchat-quantize).
  static std::unique_ptr<LlamaModel> random(const ModelConfig& cfg, const Options& opt, uint64_t seed,
                                            std::optional<QuantPreset> quant = std::nullopt);
  ~LlamaModel();

  const ModelConfig& config() const { return cfg_; }
  const Vocab& vocab() const { return vocab_; }
  const std::string& path() const { return path_; }
  int n_ctx() const { return n_ctx_; }
  int n_seq() const { return static_cast<int>(kv_.size()); }
  int max_batch() const { return max_batch_; }
  // The KV cache of sequence `seq` ([0, n_seq); std::out_of_range otherwise).
  KvCache& kv(int seq = 0) { return kv_.at(static_cast<size_t>(seq)); }
  const KvCache& kv(int seq = 0) const { return kv_.at(static_cast<size_t>(seq)); }

  // Runs the batch, writes K/V rows into sequence batch.seq's cache at slots kv_pos0 ..
  // kv_pos0 + n_tokens - 1 and returns logits [out_rows.size(), n_vocab] (a view into scratch,
  // valid until the next call). Throws std::invalid_argument when the batch does not fit
  // (n_tokens > max_batch, slots past n_ctx, bad parent link, token id or position out of
  // range, seq out of range).
  std::span<const float> forward(const Batch& batch);

  // One forward over several sequences' batches (at most one batch per sequence; their rows
  // together at most max_batch). Returns logits [Σ out_rows, n_vocab], batch by batch in the
  // given order, and the hidden states [hidden_layers.size(), Σ hidden rows, d_model] (a
  // batch's hidden rows: its hidden_rows when any batch gives them, else its out_rows) of the
  // requested layers (il in [0, n_layer): the residual stream after layer il;
  // kHiddenFinalNorm: the final norm's output). Same errors as forward(Batch).
  ForwardOut forward(std::span<const Batch* const> batches, std::span<const int32_t> hidden_layers = {});

  // Brings sequence seq's cache to hold exactly ctx[0, upto) (0 < upto <= ctx.size() <= n_ctx):
  // keeps the longest prefix it already shares with ctx and feeds the rest in chunks of
  // max_batch. With `want_logits` at least the last token ctx[upto − 1] is fed and its logits
  // [n_vocab] are returned (valid until the next forward); otherwise returns an empty span.
  std::span<const float> sync_cache(std::span<const int32_t> ctx, int upto, bool want_logits, int seq = 0);

  // Hidden states of `n_rows` consecutive fed rows starting at position `pos0`:
  // hidden [layers.size(), n_rows, d_model] (a view into scratch, valid during the callback).
  using HiddenChunkFn = std::function<void(int pos0, int n_rows, std::span<const float> hidden)>;
  // As sync_cache(ctx, upto, false, seq), and every row it feeds also returns the hidden states
  // of `layers` (ids as forward's hidden_layers), passed to on_chunk chunk by chunk in position
  // order (each chunk at most max_batch rows). Rows the cache already shares with ctx are not
  // fed (truncate the cache first to re-feed them: the rows are bit-identical, the kernels are
  // batch-invariant). Every fed row is an out row, so its logits are computed too (the backends
  // return hidden states of out rows only). Throws as sync_cache and forward.
  void sync_cache_hidden(std::span<const int32_t> ctx, int upto, int seq, std::span<const int32_t> layers,
                         const HiddenChunkFn& on_chunk);

  // Bytes held per component (weights as held by the backend, KV cache, activations incl. the
  // mask buffer) and, on CUDA, device memory used/total (cudaMemGetInfo, whole device).
  MemoryInfo memory() const;
  size_t weight_bytes() const { return memory().weights_bytes; }
  size_t kv_bytes() const { return memory().kv_bytes; }
  BackendKind backend_kind() const { return backend_->kind(); }
  // "CPU" or the GPU's name.
  std::string device_name() const { return backend_->device_name(); }
  // The CPU thread pool the model's forwards run on (Backend::cpu_pool); nullptr on CUDA.
  std::shared_ptr<cpu::ThreadPool> cpu_pool() const { return backend_->cpu_pool(); }
  // The target's LM head ([n_vocab, d_model]: output, or token_embd when tied) as the CPU backend
  // packed it in panels, with the arena that keeps it alive: a CPU drafter that reads the
  // target's head (DFlash block drafter, MTP head) shares it instead of reading the file's
  // row-major copy (faster products, no second copy in the caches). keep == nullptr on CUDA or
  // when the head was not packed (SPECCHAT_CPU_PACK=0, a non-16-bit type, memory).
  SharedWeight packed_lm_head() const;
  // Records the time of each operation of later forwards into `p` (engine/op_profile.h; null =
  // stop; `p` must outlive the recording). CPU: wall time per op; CUDA: device time between CUDA
  // events. False on a backend that cannot (none today).
  bool set_profile(OpProfile* p) { return backend_->set_profile(p); }

 private:
  LlamaModel() = default;
  // Sizes the KV cache and mask buffer once the backend exists.
  void finish_init(const Options& opt, int n_ctx);
  ModelConfig cfg_;
  Vocab vocab_;
  std::string path_;
  int max_batch_ = 0;
  int n_ctx_ = 0;
  std::unique_ptr<GgufFile> file_;    // the mapping the CPU backend's weight views read
  std::unique_ptr<Backend> backend_;  // declared before kv_: kv_ may point at its row stores
  std::vector<KvCache> kv_;           // [n_seq]
  std::vector<uint8_t> visible_;      // [max_batch, n_ctx + max_batch] tree masks of the current forward
  std::vector<SeqSegment> segs_;      // [n_seq] at most, reserved at load
  std::vector<int32_t> tokens_, pos_, out_rows_, hidden_rows_;  // [max_batch] concatenated rows
  std::vector<float> embd_;                       // [max_batch, d_model] concatenated Batch::embd
};

}  // namespace specchat
