// A multi-token-prediction head (DeepSeek-V3, DeepSeek-AI 2024, §2.2: one MTP module, applied
// recursively) bound to a loaded target model, on the CPU. The contract (math, GGUF layout) is
// docs/design/target-feature-drafters.md, "MTP head".
//
// Context row i (position i) combines the target's last-layer hidden state h_i (engine hidden
// layer n_layer − 1: the residual stream after the last layer, before the final norm) and the
// embedding of the next token t_{i+1}:
//   u_i = W_eh · [RMSNorm_e(emb(t_{i+1})); RMSNorm_h(h_i)]        W_eh [d, 2d], embedding first
// then one llama layer (pre-norm, causal attention over the head's own earlier rows, GQA, RoPE
// on adjacent pairs at position i, SwiGLU FFN) gives g_i, and
//   logits_i = W_out · RMSNorm_out(g_i)                            predicts t_{i+2}
// with the TARGET's token embedding, final norm and LM head (read from the target's GGUF file).
//
// The model is immutable after load (share it between sequences); every sequence keeps its own
// MtpState (K/V rows and scratch).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/drafters/bind_error.h"
#include "engine/gguf.h"
#include "engine/panel_arena.h"
#include "kernels/dtype.h"

namespace specchat {

class LlamaModel;
namespace cpu {
class ThreadPool;
}

// Hyper-parameters of the head (GGUF `specchat-mtp.*` keys) plus the target's vocabulary size.
struct MtpConfig {
  int d_model = 0;     // embedding_length (= the target's)
  int n_head = 0;      // attention.head_count
  int n_head_kv = 0;   // attention.head_count_kv (default n_head)
  int head_dim = 0;    // attention.key_length, else d_model / n_head
  int d_ff = 0;        // feed_forward_length
  int n_ctx_train = 0; // context_length (informative: positions are not limited by it)
  float rope_theta = 10000.0f;  // rope.freq_base
  float norm_eps = 1e-5f;       // attention.layer_norm_rms_epsilon (every norm of the head)
  int n_vocab = 0;     // the target's vocabulary (LM head rows)
};

// One sequence's rows of the head: K (after RoPE) and V of every slot, [n_slots, n_head_kv ·
// head_dim] each, slots [0, n) in use; and the forward's scratch. Grows on demand.
struct MtpState {
  std::vector<float> k, v;
  int n = 0;
  // scratch (contents meaningless between calls)
  std::vector<float> emb, cat, u, xb, q, kk, vv, att, tmp, gate, up;
  std::vector<uint8_t> mask;
  void truncate(int slots) { n = slots < n ? (slots < 0 ? 0 : slots) : n; }
};

class MtpModel {
 public:
  struct Options {
    // CPU kernels' thread pool (e.g. the engine's); null = serial kernels.
    std::shared_ptr<cpu::ThreadPool> pool;
  };

  // Loads the head at `path` (general.architecture = specchat-mtp) and binds it to `target`,
  // whose embedding (token_embd), final norm (output_norm) and LM head (output, else the tied
  // token_embd) it reads from the target's GGUF file (target.path(); mapped read-only, so the
  // pages are shared with the target's own mapping). The target may run on any backend.
  // Throws GgufError (malformed file or a key of the wrong type), DrafterBindError:
  //   wrong_architecture  another general.architecture
  //   unsupported         block_count != 1, an unknown specchat-mtp.* key, a tensor the head
  //                       does not use (e.g. a bias; named), partial RoPE, key_length != value_length
  //   missing_tensor      a required tensor (named)
  //   wrong_width         embedding_length != the target's d_model, or a tensor's shape (named)
  //   vocab_mismatch      specchat.target.n_vocab != the target's vocabulary
  //   target_mismatch     specchat.target.architecture != the target's architecture
  //   sha256_mismatch     specchat.target.sha256 != sha256 of the target file
  //   target_unreadable   the target has no readable GGUF file (LlamaModel::random)
  static std::shared_ptr<const MtpModel> load(const std::string& path, const LlamaModel& target,
                                              const Options& opt);
  static std::shared_ptr<const MtpModel> load(const std::string& path, const LlamaModel& target) {
    return load(path, target, Options{});
  }
  ~MtpModel();

  const MtpConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }
  int kv_dim() const { return cfg_.n_head_kv * cfg_.head_dim; }
  // Bytes of the head's matrices packed in panels at load (0: none; engine/panel_arena.h).
  size_t packed_bytes() const { return panels_.bytes; }
  // True when the LM head is the target's packed one (LlamaModel::packed_lm_head), not a copy.
  bool shares_target_head() const { return head_keep_ != nullptr; }

  // Runs the head over n rows and appends their K/V to st at slots [st.n, st.n + n) (st.n grows
  // by n). Row r: next_token[r] = t_{i+1} (in [0, n_vocab), else std::invalid_argument), h row r
  // = h [n, d_model] (the target's hidden state, or a g of the head when drafting), pos[r] = i.
  // Row r attends to slots [0, n_prefix) and to slot n_prefix + j (j < n_masked = st.n + n −
  // n_prefix, st.n before the call) when visible[r · n_masked + j] != 0; visible == nullptr:
  // every slot before the batch and causal within it (n_prefix ignored).
  // Writes g [n, d_model] (the layer's output: the residual stream before the final norm).
  void forward(std::span<const int32_t> next_token, const float* h, std::span<const int32_t> pos, int n_prefix,
               const uint8_t* visible, MtpState& st, float* g) const;

  // logits [n, n_vocab] = target output · target output_norm(g [n, d_model]).
  void logits(const float* g, int n, float* out, MtpState& st) const;

 private:
  MtpModel() = default;
  using Mat = WeightView;  // F16/BF16 ones packed in panels at load (engine/panel_arena.h)
  void linear(const float* x, const Mat& w, float* y, int n) const;

  MtpConfig cfg_;
  std::string path_;
  std::unique_ptr<GgufFile> file_, target_file_;
  std::shared_ptr<cpu::ThreadPool> pool_;
  // target's
  const void* tok_embd_ = nullptr;
  DType tok_embd_type_ = DType::f32;
  Mat output_;
  std::vector<float> output_norm_;
  float target_norm_eps_ = 1e-5f;  // the target's final-norm epsilon
  // head's
  Mat eh_proj_, wq_, wk_, wv_, wo_, w_gate_, w_up_, w_down_;
  std::vector<float> enorm_, hnorm_, attn_norm_, ffn_norm_;
  // RoPE table (cpu::rope_table: the same bits as cpu::rope) for positions [0, rope_n_pos_):
  // the target's context and 64 drafted positions past it; rows past it compute their angles.
  int rope_n_pos_ = 0;
  std::vector<float> rope_cos_, rope_sin_;  // [rope_n_pos_, head_dim / 2]
  PanelArena panels_;                      // the head's F16/BF16 matrices, packed
  std::shared_ptr<const void> head_keep_;  // the target's packed LM head's arena, when output_ is it
};

}  // namespace specchat
