// Pre-tokenizers of byte-level BPE vocabularies (engine/pretokenizer.h): the named regex splits
// (PCRE2) and NFC (ICU).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/pretokenizer.h"
#include "engine/vocab.h"

using namespace specchat;

namespace {
std::vector<std::string> pieces(const PreTokenizer& p, const std::string& text) {
  std::vector<std::string> out;
  size_t covered = 0;
  for (const auto& [b, n] : p.split(text)) {
    REQUIRE(b == covered);  // the spans cover the text in order
    REQUIRE(n > 0);
    out.push_back(text.substr(b, n));
    covered = b + n;
  }
  REQUIRE(covered == text.size());
  return out;
}
using V = std::vector<std::string>;
}  // namespace

TEST_CASE("pre-tokenizer names: the known ones, an unknown one is a clear error", "[unit]") {
  CHECK(PreTokenizer::names() == V{"gpt-2", "llama-bpe", "qwen2"});
  CHECK_THROWS_AS(PreTokenizer("deepseek-llm"), VocabError);
  CHECK_THROWS_WITH(PreTokenizer("deepseek-llm"),
                    Catch::Contains("deepseek-llm") && Catch::Contains("llama-bpe") && Catch::Contains("qwen2"));
  CHECK_THROWS_AS(PreTokenizer(""), VocabError);
}

TEST_CASE("pre-tokenizer splits: gpt-2, llama-bpe and qwen2", "[unit]") {
  const PreTokenizer gpt2("gpt-2"), llama3("llama-bpe"), qwen2("qwen2");
  CHECK(pieces(gpt2, "Hello world's 12345!!  x") == V{"Hello", " world", "'s", " 12345", "!!", " ", " x"});
  CHECK(pieces(llama3, "Hello world's 12345!!  x") ==
        V{"Hello", " world", "'s", " ", "123", "45", "!!", " ", " x"});
  CHECK(pieces(qwen2, "Hello world's 12345!!  x") ==
        V{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5", "!!", " ", " x"});
  // Case-insensitive contractions (llama-bpe, qwen2), not in gpt-2.
  CHECK(pieces(llama3, "WE'LL") == V{"WE", "'LL"});
  CHECK(pieces(gpt2, "WE'LL") == V{"WE", "'", "LL"});
  // Newlines: runs of whitespace ending in a newline stay together; punctuation keeps trailing
  // newlines (llama-bpe, qwen2).
  CHECK(pieces(qwen2, "a\n\n  b") == V{"a", "\n\n", " ", " b"});
  CHECK(pieces(qwen2, "x.\n\ny") == V{"x", ".\n\n", "y"});
  // Unicode properties: letters of any script, \s beyond ASCII (U+3000).
  // (Without Unicode \s, U+3000 would be punctuation and "\u3000\u3000" one piece.)
  CHECK(pieces(qwen2, "caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x80\xE3\x80\x80z") ==
        V{"caf\xC3\xA9", " \xE4\xBD\xA0\xE5\xA5\xBD", "\xE3\x80\x80", "\xE3\x80\x80z"});
  CHECK(pieces(gpt2, "").empty());
}

TEST_CASE("pre-tokenizer: ill-formed UTF-8 bytes become pieces of their own", "[unit]") {
  const PreTokenizer qwen2("qwen2");
  CHECK(pieces(qwen2, "ab\xFF\xC3 cd") == V{"ab", "\xFF", "\xC3", " cd"});
  CHECK(qwen2.normalize("e\xCC\x81\xFF") == "e\xCC\x81\xFF");  // not UTF-8: left as is
}

TEST_CASE("pre-tokenizer: qwen2 normalizes to NFC, the others do not", "[unit]") {
  const std::string decomposed = "Cafe\xCC\x81 \xE2\x84\xAB \xEF\xAC\x81";  // e + U+0301, U+212B, U+FB01
  CHECK(PreTokenizer("qwen2").normalize(decomposed) == "Caf\xC3\xA9 \xC3\x85 \xEF\xAC\x81");  // ﬁ: NFKC only
  CHECK(PreTokenizer("llama-bpe").normalize(decomposed) == decomposed);
  CHECK(PreTokenizer("gpt-2").normalize(decomposed) == decomposed);
  CHECK(PreTokenizer("qwen2").normalize("plain") == "plain");
  CHECK(PreTokenizer("qwen2").ignore_merges() == false);
  CHECK(PreTokenizer("llama-bpe").ignore_merges() == true);
}

TEST_CASE("pre-tokenizer: long runs split without running out of regex stack", "[unit]") {
  const PreTokenizer qwen2("qwen2");
  const std::string spaces(1 << 20, ' ');
  const auto sp = qwen2.split(spaces + "x");
  REQUIRE(sp.size() == 2);  // \s+(?!\S) takes all but the last space, " x" the rest
  CHECK(sp[0].second == spaces.size() - 1);
  const std::string letters(1 << 20, 'a');
  CHECK(qwen2.split(letters).size() == 1);
  CHECK(PreTokenizer("llama-bpe").split(std::string(300000, '7')).size() == 100000);
}
