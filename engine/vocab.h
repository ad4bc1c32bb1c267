// The model's vocabulary as stored in GGUF `tokenizer.ggml.*`, and token-to-text decoding.
// No SentencePiece dependency: decoding is a pure function of the pieces, so the engine core
// (and the CUDA tests) build without it. Encoding lives in tokenizer.h.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace specchat {

class GgufFile;

// Token types, numbered as in GGUF and SentencePiece's ModelProto.SentencePiece.Type.
enum class TokenType : int32_t {
  normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

// Thrown when a GGUF file lacks a usable vocabulary, or a draft/target pair is refused.
class VocabError : public std::runtime_error {
 public:
  explicit VocabError(const std::string& m) : std::runtime_error(m) {}
};

struct Vocab {
  std::string model;                 // tokenizer.ggml.model ("llama" = SentencePiece, "gpt2" =
                                     // byte-level BPE)
  std::string pre;                   // tokenizer.ggml.pre (gpt2: the pre-tokenizer), "" if absent
  std::vector<std::string> pieces;   // [n_vocab] piece strings; llama: '▁' (U+2581) marks a space;
                                     // gpt2: NORMAL pieces are byte-mapped (engine/bpe.h), the
                                     // others raw text
  std::vector<std::string> merges;   // [n_merges] gpt2: "left right" in rank order
  std::vector<float> scores;         // [n_vocab]
  std::vector<TokenType> types;      // [n_vocab]
  int32_t bos_id = 1, eos_id = 2, unk_id = 0;
  int32_t eot_id = -1;               // end of turn (tokenizer.ggml.eot_token_id), -1 if none
  bool add_bos = true;               // tokenizer.ggml.add_bos_token
  bool add_space_prefix = true;      // tokenizer.ggml.add_space_prefix (dummy prefix)
  std::string chat_template;         // tokenizer.chat_template (a template *name* here)

  // Reads tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,bos/eos/unknown/eot_token_id,
  // add_bos_token,add_space_prefix}. Throws VocabError naming the missing/invalid key.
  static Vocab from_gguf(const GgufFile& f);

  int32_t size() const { return static_cast<int32_t>(pieces.size()); }
  // True for ids that end generation: eos and eot.
  bool is_eog(int32_t id) const { return id == eos_id || (eot_id >= 0 && id == eot_id); }
  // Bytes of one token: llama: '▁' -> ' ', <0xXX> byte tokens -> that byte; gpt2: a NORMAL
  // piece's byte-mapped code points -> their bytes (the text as is if it maps no bytes), other
  // pieces as their text; control and unknown tokens -> "", and under gpt2 unused ones too
  // (padding entries). Throws std::out_of_range for an id outside [0, size()).
  std::string token_bytes(int32_t id) const;
  // Concatenated bytes of ids; drops the dummy-prefix space at the start when `strip_prefix`
  // (llama only: byte-level BPE adds no dummy prefix).
  // Bytes may be incomplete UTF-8 (byte fallback); see utf8.h for safe streaming.
  std::string decode(const std::vector<int32_t>& ids, bool strip_prefix = false) const;
  // Stable 64-bit FNV-1a hash over model name, pieces, types and special ids (stored with messages).
  uint64_t hash() const;
};

// Outcome of checking that a draft can serve a target (FAULT-KINDS B05, B06).
// Rule: tokenizer models (tokenizer.ggml.model: the same piece string means other bytes under
// "llama" and "gpt2") must match. Sizes must match, or differ only by trailing padding: every
// entry of the longer vocabulary past the shorter one's end is UNUSED (converters pad the
// embedding rows so, e.g. Qwen2.5-7B has 152,064 entries, 0.5B 151,936); the draft then proposes
// only ids of the shared range (a warning says so). BOS/EOS/EOT ids and add_bos must match; every NORMAL,
// BYTE, USER_DEFINED or UNKNOWN entry must match in string and type. Entries that are CONTROL or
// UNUSED in *both* files may differ in string (the draft can never emit them in text): they are
// accepted and listed in `warnings`, except the BOS/EOS/EOT entries themselves, which must match
// in string too (B06: end-of-generation tokens are never a tolerated difference). Any other
// difference is refused. Checks run in that order; `error` names the first failure. Ids are
// compared over the shared range [0, min(sizes)).
struct VocabCheck {
  bool ok = true;
  std::string error;                  // why refused (names sizes or the first differing id)
  std::vector<std::string> warnings;  // accepted differences, one line each
};
VocabCheck check_draft_vocab(const Vocab& target, const Vocab& draft);

}  // namespace specchat
