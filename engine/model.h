// A loaded llama-architecture model: config, vocabulary, f32 weights, KV cache and the CPU
// forward over a batch of tokens with explicit positions and tree/causal masking.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/kv_cache.h"
#include "engine/model_config.h"
#include "engine/vocab.h"

namespace specchat {

// Thrown when a file parses as GGUF but is not a usable model (wrong architecture, tensor
// missing or of the wrong shape). GgufError covers malformed files.
class ModelError : public std::runtime_error {
 public:
  explicit ModelError(const std::string& m) : std::runtime_error(m) {}
};

// One forward's input. All arrays are [n_tokens].
// Token i is written to KV slot kv_pos0 + i and has RoPE position pos[i]. It attends to the
// shared prefix, cache slots [0, n_prefix), and to its ancestors and itself (tree attention,
// SpecInfer §4 / Medusa §2.3). Ancestors are given by parent[i]: a batch index < i, or −1 for
// "no parent in this batch"; in the latter case parent_slot[i] (when given) names an absolute
// cache slot in [n_prefix, kv_pos0) written by an earlier forward, whose own ancestors are
// followed through the cache's slot links. A chain has parent[i] = i − 1.
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> parent;
  std::vector<int32_t> parent_slot;  // optional, [n_tokens], −1 = none
  int kv_pos0 = 0;
  int n_prefix = -1;                 // −1 = kv_pos0 (everything before the batch is shared)
  // Rows whose logits are returned, in this order (e.g. all rows when verifying a draft,
  // only the last when prefilling).
  std::vector<int32_t> out_rows;

  // A causal chain of `toks` starting at position/slot `start`; returns logits for every row
  // when `all_logits`, else only the last row.
  static Batch chain(std::span<const int32_t> toks, int start, bool all_logits);
};

class LlamaModel {
 public:
  struct Options {
    int n_ctx = 0;      // KV cache length in tokens; 0 = the model's n_ctx_train
    int max_batch = 128;  // largest Batch the forward accepts (scratch is sized up front)
    int n_threads = 0;  // BLAS / op threads; 0 = all cores
  };

  // Loads a GGUF file. F32, F16, BF16 and Q8_0 weights are converted to f32 in memory.
  // Throws GgufError (malformed file, names the file), ModelError (not a llama model),
  // VocabError (no usable vocabulary).
  static std::unique_ptr<LlamaModel> load(const std::string& path, const Options& opt);
  static std::unique_ptr<LlamaModel> load(const std::string& path) { return load(path, Options{}); }
  ~LlamaModel();

  const ModelConfig& config() const { return cfg_; }
  const Vocab& vocab() const { return vocab_; }
  const std::string& path() const { return path_; }
  int n_ctx() const { return kv_.n_ctx(); }
  int max_batch() const { return max_batch_; }
  KvCache& kv() { return kv_; }
  const KvCache& kv() const { return kv_; }

  // Runs the batch, writes K/V rows into the cache at slots kv_pos0 .. kv_pos0 + n_tokens - 1
  // and returns logits [out_rows.size(), n_vocab] (a view into scratch, valid until the next
  // call). Throws std::invalid_argument when the batch does not fit (n_tokens > max_batch,
  // slots past n_ctx, bad parent link, token id out of range).
  std::span<const float> forward(const Batch& batch);

  // Brings the cache to hold exactly ctx[0, upto) (0 < upto <= ctx.size() <= n_ctx): keeps the
  // longest prefix it already shares with ctx and feeds the rest in chunks of max_batch. With
  // `want_logits` at least the last token ctx[upto − 1] is fed and its logits [n_vocab] are
  // returned (valid until the next forward); otherwise returns an empty span.
  std::span<const float> sync_cache(std::span<const int32_t> ctx, int upto, bool want_logits);

  // Bytes held: weights (f32 in memory) and the KV cache.
  size_t weight_bytes() const;
  size_t kv_bytes() const { return kv_.bytes(); }

 private:
  LlamaModel() = default;
  struct Weights;
  struct Scratch;
  ModelConfig cfg_;
  Vocab vocab_;
  std::string path_;
  KvCache kv_;
  int max_batch_ = 0;
  std::unique_ptr<Weights> w_;
  std::unique_ptr<Scratch> s_;
};

}  // namespace specchat
