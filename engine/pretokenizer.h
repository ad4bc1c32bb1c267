// Pre-tokenization of byte-level BPE vocabularies: the text normalizer and the regex split named
// by GGUF `tokenizer.ggml.pre`, before the merges run on each piece (engine/bpe.h).
//
// The split is a real regex engine with Unicode properties (PCRE2, UTF + UCP mode, JIT-compiled
// when the library supports it); normalization is ICU's NFC. Patterns, as in each model's
// tokenizer.json (Split with behavior "Isolated": matches are the pieces):
//   "gpt-2":     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   "llama-bpe": (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+     (Llama 3; ignore_merges)
//   "qwen2":     as llama-bpe with \p{N} (one digit per piece), after NFC (Qwen 2/2.5/3)
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specchat {

class PreTokenizer {
 public:
  // Throws VocabError naming `pre` and the known names when it is not one of them.
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The text the split sees: NFC for "qwen2" (its tokenizer.json normalizer), else `text`.
  // Text that is not valid UTF-8 is returned unchanged.
  std::string normalize(std::string_view text) const;
  // Splits `text` into [n_pieces] (offset, length) byte spans that cover it in order. Bytes of
  // an ill-formed UTF-8 sequence (which no pattern matches) become pieces of their own.
  std::vector<std::pair<size_t, size_t>> split(std::string_view text) const;
  // True when a piece that is itself in the vocabulary skips the merges (Llama 3).
  bool ignore_merges() const { return ignore_merges_; }
  const std::string& name() const { return name_; }
  // Names the constructor accepts.
  static std::vector<std::string> names();

 private:
  struct Regex;
  std::string name_;
  bool nfc_ = false, ignore_merges_ = false;
  std::unique_ptr<Regex> re_;
};

}  // namespace specchat
