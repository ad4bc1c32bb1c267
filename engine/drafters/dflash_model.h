// DFlash block drafter model (Chen et al. 2026, "DFlash", arXiv 2602.06036; z-lab/dflash): a
// few Qwen3-style layers that read fused hidden states of the target ("context rows") and
// predict a block of B − 1 tokens after the last committed token in ONE forward, with the
// target's embedding and LM head. The math, GGUF layout and error contract are
// docs/design/target-feature-drafters.md; this file is its engine side (CPU).
//
//   auto m = DFlashModel::load("dflash.gguf", target);   // binds and checks against `target`
//   DFlashState s = m->new_state();                       // one per sequence
//   m->append_context(s, 0, rows);                        // rows of committed tokens 0 … n − 2
//   m->draft_block(s, ctx[n − 1], n − 1, logits);         // logits [B − 1, n_vocab]
//
// Weights are typed views into the drafter file's mapping (F32, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K
// through cpu::linear); F16 and BF16 matrices are packed in panels at load, as the target's
// CpuBackend does (engine/panel_arena.h). The target's token_embd is a view into the target's
// own file (mapped again here: the pages are shared with the target's mapping), and so is its
// output unless the target runs on the CPU with a packed LM head, which is then shared
// (LlamaModel::packed_lm_head). So the drafter works whatever backend the target runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu_backend.h"
#include "engine/drafters/bind_error.h"
#include "engine/gguf.h"
#include "engine/panel_arena.h"
#include "engine/speculative/drafter.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/thread_pool.h"

namespace specchat {

class LlamaModel;

// Hyper-parameters of a DFlash drafter (GGUF dflash.* keys), bound to its target.
struct DFlashConfig {
  int d_model = 0;     // dflash.embedding_length (= the target's d_model)
  int n_layer = 0;     // dflash.block_count
  int n_head = 0;      // dflash.attention.head_count
  int n_head_kv = 0;   // dflash.attention.head_count_kv (default n_head)
  int head_dim = 0;    // dflash.attention.key_length (default d_model / n_head)
  int d_ff = 0;        // dflash.feed_forward_length
  int n_ctx_train = 0;  // dflash.context_length (0 = absent; informational)
  int block_size = 0;  // B: dflash.block_size, the anchor row + B − 1 drafted tokens
  float rope_theta = 10000.0f;  // dflash.rope.freq_base (NEOX halves, all head_dim rotated)
  float norm_eps = 1e-5f;       // dflash.attention.layer_norm_rms_epsilon
  std::vector<int32_t> taps;    // [m] engine hidden-layer ids (file value − 1), in file order
  int32_t mask_token = 0;       // tokenizer.ggml.mask_token_id
  int n_vocab = 0;              // the target's vocabulary size
};

struct DFlashOptions {
  // Positions the drafter can encode: context rows and block rows lie in [0, n_pos);
  // 0 = the target's n_ctx + block_size. The RoPE table is built once for them.
  int n_pos = 0;
  int n_threads = 0;  // CPU threads for the kernels when `pool` is null (0 = all cores)
  // The CPU kernels' thread pool (share the engine's); null = the model makes its own.
  std::shared_ptr<cpu::ThreadPool> pool;
  // Block-type (Q8_0, …) matrices: activations rounded to 8 bits or kept in f32
  // (cpu::Activations, kernels/cpu/linear.h; LlamaModel::Options::activations).
  cpu::Activations activations = cpu::Activations::q8;
  // Compare specchat.target.sha256 (when the file has it) with the target file's SHA-256.
  // Hashing reads the whole target file (about 1 s per GB).
  bool check_sha256 = true;
};

// One sequence's drafter state: per drafter layer, the K/V rows of its context rows (row i at
// position i: K after k_norm and RoPE), plus working memory. Grows as rows are appended
// (geometric growth: amortised, no allocation on most steps); never shrinks.
class DFlashState {
 public:
  int n_rows() const { return n_rows_; }
  // Keeps rows [0, n) (n ≥ n_rows(): no change; n < 0: std::invalid_argument).
  void truncate(int n);

 private:
  friend class DFlashModel;
  int n_rows_ = 0;
  int capacity_ = 0;                    // rows the K/V arrays hold (context + one block)
  std::vector<std::vector<float>> k_, v_;  // [n_layer][capacity, n_head_kv * head_dim]
  // Working memory of the forwards (sized by DFlashModel).
  std::vector<float> feat_, x_, xb_, q_, kb_, vb_, att_, gate_, up_, scores_;
  std::vector<int32_t> pos_, ids_;
};

class DFlashModel {
 public:
  // Loads the drafter at `path` and binds it to `target` (a model loaded from a file: its
  // token_embd and output are read from that file; a LlamaModel::random target is refused with
  // target_unreadable). Checks, in this order: architecture and keys (wrong_architecture,
  // missing_key, bad_value, unsupported: sliding window, unknown dflash.* keys), sizes against
  // the target (wrong_width: embedding_length; bad_tap; vocab_mismatch: MASK id, vocab keys;
  // target_mismatch: specchat.target.architecture), tensor names (unsupported: attention
  // biases, unknown tensors), tensor shapes (missing_tensor; wrong_width: fc.weight's input ≠
  // taps × d_model; wrong_shape; vocab_mismatch: token_embd / output ≠ [n_vocab, d_model]),
  // then the SHA-256 (sha256_mismatch). Throws DrafterBindError (engine/drafters/bind_error.h),
  // GgufError (malformed file).
  static std::shared_ptr<const DFlashModel> load(const std::string& path, const LlamaModel& target,
                                                  const DFlashOptions& opt = {});
  ~DFlashModel();

  const DFlashConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }
  int block_size() const { return cfg_.block_size; }
  int n_pos() const { return n_pos_; }
  // Bytes of the drafter's own weights as held (not the target's embedding / head).
  size_t weight_bytes() const { return weight_bytes_; }

  // Bytes of the drafter's matrices packed in panels at load (0: none; engine/panel_arena.h).
  size_t packed_bytes() const { return panels_.bytes; }
  // True when the LM head is the target's packed one (LlamaModel::packed_lm_head), not a copy.
  bool shares_target_head() const { return head_keep_ != nullptr; }

  // A fresh state (no rows) with its working memory allocated.
  DFlashState new_state() const;

  // Appends context rows for committed tokens at positions pos0 … pos0 + h.n_rows − 1
  // (pos0 must equal s.n_rows()): c = RMSNorm_enc(W_fc · [h^(l_1); …; h^(l_m)]), then per
  // layer k = RoPE(KNorm(W_k c), pos), v = W_v c. h must hold every tap of config().taps with
  // d_model = config().d_model. std::invalid_argument on a gap, a missing tap, a width
  // mismatch or a position ≥ n_pos().
  void append_context(DFlashState& s, int pos0, const HiddenRows& h) const;

  // Runs one block: tokens [anchor_token, MASK × (B − 1)] at positions anchor_pos …
  // anchor_pos + B − 1, attending to every context row of `s` and every block row
  // (bidirectional), and writes the logits of block rows 1 … n_out (the marginals of the tokens
  // at positions anchor_pos + 1 … anchor_pos + n_out) to logits [n_out, n_vocab];
  // n_out ≤ 0 means B − 1 (all). Fewer rows save LM-head work (the largest part for big
  // vocabularies) when the tree cannot reach every depth; the rows computed do not depend on
  // n_out (up to f32 summation order for an f32 LM head). The state's rows are unchanged (block rows are never kept). std::invalid_argument
  // when anchor_pos < s.n_rows(), anchor_pos + B > n_pos(), the token is out of range, n_out >
  // B − 1 or logits is too small.
  // `width` (0 = block_size): run a narrower block of `width` rows (B above becomes width; a
  // drafter trained on several widths, like the bundled one on 8 and 16, drafts a short block
  // at a short block's cost); std::invalid_argument outside [2, block_size].
  void draft_block(DFlashState& s, int32_t anchor_token, int anchor_pos, std::span<float> logits, int n_out = 0,
                   int width = 0) const;

 private:
  DFlashModel() = default;
  struct Layer {
    const float* attn_norm = nullptr;  // [d_model]
    WeightView wq;                     // [n_head * head_dim, d_model]
    WeightView wk, wv;                 // [n_head_kv * head_dim, d_model]
    WeightView wo;                     // [d_model, n_head * head_dim]
    const float* q_norm = nullptr;     // [head_dim]
    const float* k_norm = nullptr;     // [head_dim]
    const float* ffn_norm = nullptr;   // [d_model]
    WeightView w_gate, w_up;           // [d_ff, d_model]
    WeightView w_down;                 // [d_model, d_ff]
  };
  // Makes room for `rows` K/V rows in every layer of s.
  void reserve_rows(DFlashState& s, int rows) const;
  // RMSNorm per head, in place, then RoPE at pos: x [n, heads, head_dim].
  void norm_rope(float* x, const float* w, const int32_t* pos, int n, int heads) const;

  DFlashConfig cfg_;
  std::string path_;
  std::unique_ptr<GgufFile> file_;         // the drafter's mapping (weight views point into it)
  std::unique_ptr<GgufFile> target_file_;  // the target's mapping (token_embd / output views)
  WeightView fc_;                          // [d_model, m · d_model]
  const float* enc_norm_ = nullptr;        // [d_model]
  const float* output_norm_ = nullptr;     // [d_model]
  WeightView tok_embd_;                    // [n_vocab, d_model] (the target's unless the file has one)
  WeightView output_;                      // [n_vocab, d_model] (the target's LM head unless the file has one)
  std::vector<Layer> layers_;              // [n_layer]
  std::vector<std::unique_ptr<float[]>> owned_;  // norm vectors converted to f32
  size_t weight_bytes_ = 0;
  int n_pos_ = 0;
  cpu::RopeParams rope_;
  std::vector<float> rope_cos_, rope_sin_;  // [n_pos, head_dim / 2]
  std::shared_ptr<cpu::ThreadPool> pool_;
  cpu::Activations act_ = cpu::Activations::q8;  // DFlashOptions::activations
  PanelArena panels_;                  // the drafter's F16/BF16 matrices, packed (engine/panel_arena.h)
  std::shared_ptr<const void> head_keep_;  // the target's packed LM head's arena, when output_ is it
};

}  // namespace specchat
