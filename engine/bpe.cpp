// Byte-level BPE: byte mapping and merge loop (see bpe.h).
#include "engine/bpe.h"

#include <queue>

#include "engine/utf8.h"
#include "engine/vocab.h"

namespace specchat {
namespace {

// Code point for each byte, as GPT-2's bytes_to_unicode.
std::array<uint32_t, 256> make_byte_cps() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    cp[b] = printable ? b : next++;
  }
  return cp;
}

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

struct ByteTables {
  std::array<std::string, 256> text;
  std::unordered_map<uint32_t, uint8_t> byte_of;  // code point -> byte
  ByteTables() {
    const auto cps = make_byte_cps();
    for (int b = 0; b < 256; ++b) {
      text[static_cast<size_t>(b)] = utf8_of(cps[static_cast<size_t>(b)]);
      byte_of[cps[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

// Decodes one UTF-8 code point at s[i] (s known valid); advances i.
uint32_t next_cp(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
  i += static_cast<size_t>(n);
  return cp;
}

}  // namespace

const std::string& bpe_byte_text(uint8_t b) { return tables().text[b]; }

bool bpe_piece_bytes(std::string_view piece, std::string& out) {
  out.clear();
  if (!utf8_valid(piece)) return false;
  const auto& byte_of = tables().byte_of;
  for (size_t i = 0; i < piece.size();) {
    const auto it = byte_of.find(next_cp(piece, i));
    if (it == byte_of.end()) return false;
    out += static_cast<char>(it->second);
  }
  return true;
}

BpeMerger::BpeMerger(const Vocab& vocab, bool ignore_merges)
    : unk_id_(vocab.unk_id), ignore_merges_(ignore_merges) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.types[static_cast<size_t>(id)] != TokenType::normal) continue;
    normal_.emplace(vocab.pieces[static_cast<size_t>(id)], id);  // first id wins on duplicates
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = normal_.find(bpe_byte_text(static_cast<uint8_t>(b)));
    byte_id_[static_cast<size_t>(b)] = it == normal_.end() ? -1 : it->second;
  }
  merges_.reserve(vocab.merges.size());
  for (size_t r = 0; r < vocab.merges.size(); ++r) {
    const std::string& m = vocab.merges[r];
    const size_t sp = m.find(' ', 1);  // a side is never empty; "Ġ Ġ" has its space at 1
    if (sp == std::string::npos) {
      throw VocabError("tokenizer.ggml.merges: merge " + std::to_string(r) + " \"" + utf8_printable(m) +
                       "\" has no space between its two sides");
    }
    const auto l = normal_.find(m.substr(0, sp)), rr = normal_.find(m.substr(sp + 1));
    const auto merged = normal_.find(m.substr(0, sp) + m.substr(sp + 1));
    if (l == normal_.end() || rr == normal_.end() || merged == normal_.end()) continue;
    merges_.emplace(key(l->second, rr->second), Merge{static_cast<int32_t>(r), merged->second});
  }
}

void BpeMerger::encode_word(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (ignore_merges_) {
    std::string text;
    for (char c : bytes) text += bpe_byte_text(static_cast<uint8_t>(c));
    const auto it = normal_.find(text);
    if (it != normal_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols in a doubly linked list; candidate pairs in a min-heap by (rank, position), checked
  // against the list when popped (a pair is stale once either side has merged).
  const size_t n = bytes.size();
  std::vector<int32_t> id(n);
  std::vector<int> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t b = byte_id_[static_cast<unsigned char>(bytes[i])];
    id[i] = b >= 0 ? b : unk_id_;
    prev[i] = static_cast<int>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](int p) {
    if (p < 0 || next[static_cast<size_t>(p)] < 0) return;
    const int q = next[static_cast<size_t>(p)];
    const auto it = merges_.find(key(id[static_cast<size_t>(p)], id[static_cast<size_t>(q)]));
    if (it != merges_.end()) heap.push({it->second.rank, p, id[static_cast<size_t>(p)], id[static_cast<size_t>(q)]});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int>(i));
  std::vector<bool> dead(n, false);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const auto p = static_cast<size_t>(c.pos);
    if (dead[p] || next[p] < 0) continue;
    const auto q = static_cast<size_t>(next[p]);
    if (id[p] != c.left || id[q] != c.right) continue;  // stale
    id[p] = merges_.at(key(c.left, c.right)).id;
    dead[q] = true;
    next[p] = next[q];
    if (next[q] >= 0) prev[static_cast<size_t>(next[q])] = c.pos;
    consider(prev[p]);
    consider(c.pos);
  }
  for (int i = 0; i >= 0; i = next[static_cast<size_t>(i)]) out.push_back(id[static_cast<size_t>(i)]);
}

}  // namespace specchat
