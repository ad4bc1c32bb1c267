// Text -> token ids with the SentencePiece library, built from a GGUF vocabulary alone.
//
// The GGUF `tokenizer.ggml.*` arrays are turned into a serialized SentencePiece ModelProto
// (BPE when scores order merges, as Llama's tokenizer.model; byte fallback when byte pieces
// exist; normalizer "identity", dummy prefix per add_space_prefix, no whitespace collapsing)
// and loaded with SentencePieceProcessor::LoadFromSerializedProto. A `tokenizer.model` passed
// explicitly is used instead when given.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/vocab.h"

namespace sentencepiece { class SentencePieceProcessor; }

namespace specchat {

class Tokenizer {
 public:
  // Throws VocabError when the vocabulary cannot be turned into a SentencePiece model
  // (e.g. tokenizer.ggml.model is not "llama", or SentencePiece rejects the pieces: duplicates,
  // no UNKNOWN piece), or when `spm_model_path` cannot be loaded or its pieces differ from
  // `vocab`'s (the message names the first differing id).
  explicit Tokenizer(const Vocab& vocab, const std::string& spm_model_path = "");
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Encodes UTF-8 text: [n_tokens] ids, user-defined pieces (chat control tokens) matched
  // atomically, no BOS (the caller adds it: see vocab().add_bos). Empty text gives no ids.
  std::vector<int32_t> encode(const std::string& text) const;
  // Decodes ids to UTF-8 exactly as SentencePiece does (dummy-prefix space removed, control
  // tokens dropped, <unk> shown as " \xE2\x81\x87 ", each byte of an ill-formed byte-piece run
  // as U+FFFD). Throws std::out_of_range for an id outside [0, n_vocab).
  std::string decode(const std::vector<int32_t>& ids) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  Vocab vocab_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// Serializes a SentencePiece ModelProto for `vocab` (protobuf wire format, written by hand so
// no protobuf library is needed). Exposed for tests.
std::string build_spm_model_proto(const Vocab& vocab);

}  // namespace specchat
