// Byte-level BPE core (engine/bpe.h): the GPT-2 byte mapping and the merge loop, held to a
// plain quadratic reference on random merge tables.
#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/bpe.h"
#include "engine/utf8.h"
#include "engine/vocab.h"

using namespace specchat;

namespace {

// A byte-level vocabulary: the 256 byte pieces (ids 0-255) plus `extra` merged pieces.
Vocab byte_vocab() {
  Vocab v;
  v.model = "gpt2";
  v.pre = "qwen2";
  for (int b = 0; b < 256; ++b) v.pieces.push_back(bpe_byte_text(static_cast<uint8_t>(b)));
  v.types.assign(256, TokenType::normal);
  v.scores.assign(256, 0.0f);
  v.unk_id = 0;
  return v;
}

void add_merge(Vocab& v, const std::string& l, const std::string& r) {
  v.merges.push_back(l + " " + r);
  if (std::find(v.pieces.begin(), v.pieces.end(), l + r) == v.pieces.end()) {
    v.pieces.push_back(l + r);
    v.types.push_back(TokenType::normal);
    v.scores.push_back(0.0f);
  }
}

int32_t id_of(const Vocab& v, const std::string& piece) {
  const auto it = std::find(v.pieces.begin(), v.pieces.end(), piece);
  REQUIRE(it != v.pieces.end());
  return static_cast<int32_t>(it - v.pieces.begin());
}

// The textbook loop: merge the leftmost adjacent pair of lowest rank until none applies.
std::vector<int32_t> reference_bpe(const Vocab& v, const std::string& bytes) {
  std::vector<std::string> sym;
  for (char c : bytes) sym.push_back(bpe_byte_text(static_cast<uint8_t>(c)));
  for (;;) {
    size_t best = sym.size();
    size_t best_rank = v.merges.size();
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      for (size_t r = 0; r < best_rank; ++r) {
        if (v.merges[r] == sym[i] + " " + sym[i + 1]) {
          best = i;
          best_rank = r;
          break;
        }
      }
    }
    if (best == sym.size()) break;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + static_cast<long>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& s : sym) ids.push_back(id_of(v, s));
  return ids;
}

std::vector<int32_t> encode(const BpeMerger& m, const std::string& bytes) {
  std::vector<int32_t> out;
  m.encode_word(bytes, out);
  return out;
}

}  // namespace

TEST_CASE("bpe byte mapping: 256 distinct printable code points, GPT-2's table", "[unit]") {
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string& t = bpe_byte_text(static_cast<uint8_t>(b));
    CHECK(utf8_valid(t));
    seen.insert(t);
    std::string back;
    REQUIRE(bpe_piece_bytes(t, back));
    CHECK(back == std::string(1, static_cast<char>(b)));
  }
  CHECK(seen.size() == 256);
  CHECK(bpe_byte_text(' ') == "\xC4\xA0");   // Ġ U+0120
  CHECK(bpe_byte_text('\n') == "\xC4\x8A");  // Ċ U+010A
  CHECK(bpe_byte_text('\t') == "\xC4\x89");  // ĉ U+0109
  CHECK(bpe_byte_text('A') == "A");
  CHECK(bpe_byte_text(0xE9) == "\xC3\xA9");  // é: Latin-1 bytes stand for themselves
  CHECK(bpe_byte_text(0xAD) == "\xC5\x83");  // soft hyphen is not printable: U+0143
  std::string out;
  CHECK(bpe_piece_bytes("\xC4\xA0hello", out));
  CHECK(out == " hello");
  CHECK_FALSE(bpe_piece_bytes("\xE4\xBD\xA0", out));  // U+4F60 stands for no byte
  CHECK_FALSE(bpe_piece_bytes("\xC4", out));          // not UTF-8
}

TEST_CASE("bpe merges: lowest rank first, leftmost on ties", "[unit]") {
  Vocab v = byte_vocab();
  add_merge(v, "a", "b");   // rank 0
  add_merge(v, "b", "c");   // rank 1
  add_merge(v, "ab", "c");  // rank 2
  add_merge(v, "a", "a");   // rank 3
  const BpeMerger m(v, false);
  CHECK(m.n_merges() == 4);
  CHECK(encode(m, "abc") == std::vector<int32_t>{id_of(v, "abc")});
  CHECK(encode(m, "bc") == std::vector<int32_t>{id_of(v, "bc")});
  CHECK(encode(m, "aaa") == std::vector<int32_t>{id_of(v, "aa"), 'a'});  // leftmost pair first
  CHECK(encode(m, "xyz") == std::vector<int32_t>{'x', 'y', 'z'});
  CHECK(encode(m, "").empty());

  SECTION("ignore_merges: a pre-token that is a piece is emitted whole") {
    Vocab w = byte_vocab();
    add_merge(w, "a", "b");
    w.pieces.push_back("abab");  // no merge path reaches it
    w.types.push_back(TokenType::normal);
    w.scores.push_back(0.0f);
    CHECK(encode(BpeMerger(w, false), "abab") == std::vector<int32_t>{id_of(w, "ab"), id_of(w, "ab")});
    CHECK(encode(BpeMerger(w, true), "abab") == std::vector<int32_t>{id_of(w, "abab")});
  }
  SECTION("a merge line without a space is refused; one over unknown pieces is skipped") {
    Vocab w = byte_vocab();
    w.merges = {"ab"};
    CHECK_THROWS_WITH(BpeMerger(w, false), Catch::Contains("merge 0"));
    w.merges = {"q\xE4\xBD\xA0 b"};
    CHECK(BpeMerger(w, false).n_merges() == 0);
  }
  SECTION("a byte without a piece gives unk") {
    Vocab w = byte_vocab();
    w.types[0x7A] = TokenType::unused;  // 'z' is not a NORMAL piece any more
    w.unk_id = 3;
    CHECK(encode(BpeMerger(w, false), "az") == std::vector<int32_t>{'a', 3});
  }
}

TEST_CASE("bpe merges equal the quadratic reference on random tables and words", "[unit]") {
  std::mt19937 rng(2024);
  const std::string alphabet = "abcd \xC3\xA9";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (int table = 0; table < 20; ++table) {
    Vocab v = byte_vocab();
    std::vector<std::string> syms;
    for (char c : alphabet) syms.push_back(bpe_byte_text(static_cast<uint8_t>(c)));
    for (int k = 0; k < 30; ++k) {  // random merges over pieces made so far
      std::uniform_int_distribution<size_t> s(0, syms.size() - 1);
      const std::string l = syms[s(rng)], r = syms[s(rng)];
      if (std::find(v.merges.begin(), v.merges.end(), l + " " + r) != v.merges.end()) continue;
      add_merge(v, l, r);
      syms.push_back(l + r);
    }
    const BpeMerger m(v, false);
    for (int w = 0; w < 50; ++w) {
      std::string word;
      for (size_t n = rng() % 24; n > 0; --n) word += alphabet[pick(rng)];
      INFO("table " << table << " word \"" << word << "\"");
      REQUIRE(encode(m, word) == reference_bpe(v, word));
    }
  }
}

TEST_CASE("bpe: a very long pre-token is merged in n log n", "[unit]") {
  Vocab v = byte_vocab();
  add_merge(v, "a", "a");
  add_merge(v, "aa", "aa");
  const BpeMerger m(v, false);
  const std::vector<int32_t> ids = encode(m, std::string(200001, 'a'));
  REQUIRE(ids.size() == 50001);
  CHECK(ids.front() == id_of(v, "aaaa"));
  CHECK(ids.back() == 'a');
}
