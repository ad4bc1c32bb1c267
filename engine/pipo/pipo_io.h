// PIPO's input and confidence ends (docs/design/pipo.md, "Math" 1 and 4): the pair compressor
// that folds two token embeddings into one latent, and the confidence head that decides whether
// the MTP head's second token is kept. Loaded from a release unit's io.gguf
// (general.architecture = specchat-pipo-io) and bound to the backbone, whose token embedding it
// reads. Immutable after load (share it); the scratch is per caller. CPU only: the backbone and
// the MTP head may run elsewhere, these two ends are a few small matrices per step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "kernels/dtype.h"

namespace specchat {

class LlamaModel;
namespace cpu {
class ThreadPool;
}

// The PAD marker of a pair sequence's second slot (= storage's kPairPad). Not a vocabulary id.
inline constexpr int32_t kPipoPad = -1;

struct PipoIoConfig {
  int d_model = 0;    // specchat-pipo-io.embedding_length (= the backbone's)
  int conf_dim = 0;   // specchat-pipo-io.confidence_length (C)
  float norm_eps = 1e-5f;  // specchat-pipo-io.attention.layer_norm_rms_epsilon (confidence RMSNorm)
};

// Working memory of compress() / confidence(); contents meaningless between calls.
struct PipoIoScratch {
  std::vector<float> cat, mid;
};

class PipoIo {
 public:
  // Loads `path` and binds it to `backbone` (its token_embd is read from backbone.path()).
  // Throws GgufError (malformed file) or PipoError: wrong_role (another architecture),
  // wrong_shape (a width or tensor shape that disagrees with the backbone or the keys, named),
  // bad_setting (pair_size != 2, an unknown specchat-pipo-io.* key or tensor, named).
  static std::shared_ptr<const PipoIo> load(const std::string& path, const LlamaModel& backbone,
                                            std::shared_ptr<cpu::ThreadPool> pool = nullptr);
  ~PipoIo();

  const PipoIoConfig& config() const { return cfg_; }
  const std::string& path() const { return path_; }  // the io.gguf file
  int n_vocab() const { return n_vocab_; }

  // latent [d_model] of the pair (a, b): e(a) + e(b) + fc2(SiLU(fc1([e(a); e(b)]))), e(kPipoPad)
  // = pipo.pad_embd. a must be a vocabulary id, b one or kPipoPad (std::invalid_argument).
  void compress(int32_t a, int32_t b, float* latent, PipoIoScratch& s) const;

  // Confidence in [0, 1] that the MTP head's token is right: sigmoid(fc2(SiLU(fc1(RMSNorm([h;
  // g]) ⊙ w)))). h: the backbone's last-layer hidden state [d_model]; g: the MTP layer's output
  // [d_model] for the same row.
  float confidence(const float* h, const float* g, PipoIoScratch& s) const;

 private:
  PipoIo() = default;
  struct Mat {
    const void* data = nullptr;
    DType type = DType::f32;
    int n_in = 0, n_out = 0;
  };
  void linear(const float* x, const Mat& w, const std::vector<float>& bias, float* y) const;
  void embed(int32_t id, float* out) const;

  PipoIoConfig cfg_;
  std::string path_;
  int n_vocab_ = 0;
  std::unique_ptr<GgufFile> file_, backbone_file_;
  std::shared_ptr<cpu::ThreadPool> pool_;
  const void* tok_embd_ = nullptr;
  DType tok_embd_type_ = DType::f32;
  std::vector<float> pad_embd_;
  Mat comp_fc1_, comp_fc2_, conf_fc1_, conf_fc2_;
  std::vector<float> comp_b1_, comp_b2_, conf_norm_, conf_b1_, conf_b2_;
};

}  // namespace specchat
