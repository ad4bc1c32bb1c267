// Byte-level BPE (GPT-2 family: tokenizer.ggml.model = "gpt2"; Llama 3, Qwen 2/2.5/3): the byte
// <-> piece-text mapping and the merge loop over one pre-token. Engine core: no dependencies, so
// Vocab::token_bytes decodes these pieces without the tokenizer library. Pre-tokenization (the
// regex split) and added tokens live in the tokenizer (engine/pretokenizer.h, tokenizer.h).
//
// Source: Radford et al. 2019 (GPT-2), encoder.py `bytes_to_unicode` and `bpe`: every byte is
// shown as one printable code point (0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF as themselves, the 68
// others as U+0100 upward in byte order), and merges apply lowest rank first.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specchat {

struct Vocab;

// UTF-8 of the code point that stands for byte `b` in byte-level piece texts ("Ġ" for ' ').
const std::string& bpe_byte_text(uint8_t b);
// The bytes a byte-level piece text stands for. False (and `out` unspecified) when a code point
// of `piece` stands for no byte, or `piece` is not valid UTF-8.
bool bpe_piece_bytes(std::string_view piece, std::string& out);

// The merge table of a byte-level BPE vocabulary and the merge loop.
class BpeMerger {
 public:
  // `vocab.merges`: [n_merges] "left right" in rank order (tokenizer.ggml.merges). A merge whose
  // sides or result are not NORMAL pieces of the vocabulary can never apply and is skipped.
  // `ignore_merges`: a pre-token that is itself a piece is emitted whole (Llama 3's tokenizer).
  // Throws VocabError for a merge line without the separating space.
  BpeMerger(const Vocab& vocab, bool ignore_merges);

  // Appends the ids of one pre-token given as raw bytes: starts from one piece per byte and
  // merges the adjacent pair of lowest rank (leftmost on ties) until none applies; O(n log n) in
  // the pre-token length. A byte that has no piece gives vocab.unk_id.
  void encode_word(std::string_view bytes, std::vector<int32_t>& out) const;

  size_t n_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  std::unordered_map<uint64_t, Merge> merges_;        // (left id, right id) -> rank, merged id
  std::unordered_map<std::string, int32_t> normal_;   // NORMAL piece text -> id
  std::array<int32_t, 256> byte_id_{};                // piece of each single byte, -1 if none
  int32_t unk_id_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace specchat
