// Text -> token ids for a GGUF vocabulary: SentencePiece (tokenizer.ggml.model = "llama") or
// byte-level BPE (tokenizer.ggml.model = "gpt2", pre-tokenizer per tokenizer.ggml.pre).
//
// SentencePiece: the GGUF `tokenizer.ggml.*` arrays are turned into a serialized SentencePiece
// ModelProto (BPE when scores order merges, as Llama's tokenizer.model; byte fallback when byte
// pieces exist; normalizer "identity", no whitespace collapsing) and loaded with the
// SentencePiece library. Byte-level BPE: NFC where the model's tokenizer normalizes, the regex
// split of engine/pretokenizer.h (PCRE2), then our merge loop (engine/bpe.h).
//
// User text never becomes a control token (FAULT-KINDS: forged turn boundaries). encode() treats
// as text every CONTROL piece and every USER_DEFINED piece that is a control token in disguise
// (is_protected()); only chat-template markers become those ids (encode_chat_pieces). The other
// USER_DEFINED pieces (Qwen's <think>, ...) are matched atomically in text, as llama.cpp does.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/chat_template.h"
#include "engine/vocab.h"

namespace sentencepiece { class SentencePieceProcessor; }

namespace specchat {

class BpeMerger;
class PreTokenizer;

class Tokenizer {
 public:
  // Throws VocabError when the vocabulary cannot be turned into a tokenizer (tokenizer.ggml.model
  // neither "llama" nor "gpt2", an unknown or missing tokenizer.ggml.pre for gpt2, a malformed
  // merge, SentencePiece rejecting the pieces), or when `spm_model_path` cannot be loaded or its
  // pieces differ from `vocab`'s (the message names the first differing id). A tokenizer.model
  // given explicitly is used for decode(); encode() always uses the vocabulary's pieces.
  explicit Tokenizer(const Vocab& vocab, const std::string& spm_model_path = "");
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // Encodes UTF-8 user text as plain text: [n_tokens] ids, never a protected id, no BOS (the
  // caller adds it: see vocab().add_bos). `at_start`: the text starts a prompt, so SentencePiece
  // adds its dummy prefix (add_space_prefix); false for text that continues one. Empty text
  // gives no ids. Ill-formed UTF-8 is encoded byte by byte where the vocabulary allows.
  std::vector<int32_t> encode(const std::string& text, bool at_start = true) const;
  // Encodes a rendered chat (render_chat_pieces): each marker that names a CONTROL or
  // USER_DEFINED piece becomes that one id, the rest is encoded as text (adjacent text joined).
  // SentencePiece adds its dummy prefix at the start (at_start) and after a CONTROL marker, as
  // the reference tokenizers do; after a USER_DEFINED marker the text continues (SentencePiece
  // matches those inside one text, as the bundled models were trained).
  std::vector<int32_t> encode_chat_pieces(const std::vector<ChatPiece>& pieces, bool at_start = true) const;
  // Decodes ids to UTF-8. llama: exactly as SentencePiece does (dummy-prefix space removed,
  // control tokens dropped, <unk> shown as " \xE2\x81\x87 ", each byte of an ill-formed
  // byte-piece run as U+FFFD). gpt2: Vocab::decode with ill-formed bytes replaced as
  // utf8_sanitize does. Throws std::out_of_range for an id outside [0, n_vocab).
  std::string decode(const std::vector<int32_t>& ids) const;
  // True for ids user text must never produce: CONTROL pieces, and USER_DEFINED pieces that are
  // the BOS/EOS/EOT token, look like "<|...|>" (llama.cpp's converter types such added tokens
  // CONTROL) or are a chat-template marker (chat_marker_texts()).
  bool is_protected(int32_t id) const;
  // Id of the CONTROL or USER_DEFINED piece whose text is `marker` (lowest id), -1 if none.
  int32_t marker_id(const std::string& marker) const;
  // The model's BOS/EOS texts, for templates that write them.
  ChatSpecials specials() const;
  const Vocab& vocab() const { return vocab_; }

 private:
  std::vector<int32_t> encode_text(const std::string& text, bool prefix) const;
  void encode_bpe(const std::string& text, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<bool> protected_;                          // [n_vocab]
  std::unordered_map<std::string, int32_t> markers_;     // CONTROL/USER_DEFINED text -> id
  // SentencePiece: sp_decode_ as the vocabulary types its pieces (or the given file); sp_encode_
  // with protected pieces typed CONTROL and no dummy prefix (encode_text adds it).
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_decode_, sp_encode_;
  // Byte-level BPE.
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeMerger> bpe_;
  std::vector<std::pair<std::string, int32_t>> added_;   // matched USER_DEFINED, longest first
};

// Serializes a SentencePiece ModelProto for `vocab` (protobuf wire format, written by hand so
// no protobuf library is needed). SentencePiece refuses what llama.cpp loads, so the proto
// types one piece UNKNOWN (unk_id if typed so, else the first) and the other UNKNOWN pieces
// CONTROL, and gives duplicate or empty piece texts after the first a placeholder text typed
// CONTROL: ids stay the GGUF's. `as_control`: [n_vocab] or empty, more pieces to type CONTROL.
// `dummy_prefix`: the normalizer's add_dummy_prefix. Exposed for tests.
std::string build_spm_model_proto(const Vocab& vocab);
std::string build_spm_model_proto(const Vocab& vocab, const std::vector<bool>& as_control,
                                  bool dummy_prefix);

}  // namespace specchat
