// UTF-8 streaming helpers (FAULT-KINDS B17): holding back incomplete tails, sanitising.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"
#include "engine/vocab.h"
#include "test_paths.h"

using namespace specchat;

namespace {

const std::string kFffd = "\xEF\xBF\xBD";

// UTF-8 encoding of code point `cp` (no checks: callers pass scalar values).
std::string encode_cp(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Random valid UTF-8 with every sequence length and the edges of each range.
std::string random_valid(std::mt19937& rng, size_t n_chars) {
  static const std::vector<uint32_t> edges = {0x00,   0x7F,   0x80,   0x7FF,   0x800,   0xD7FF,
                                              0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x1F999, 0x10FFFF};
  std::uniform_int_distribution<int> kind(0, 4);
  std::uniform_int_distribution<uint32_t> any(0, 0x10FFFF);
  std::uniform_int_distribution<size_t> edge(0, edges.size() - 1);
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    uint32_t cp;
    switch (kind(rng)) {
      case 0: cp = 0x20 + any(rng) % 0x5F; break;
      case 1: cp = edges[edge(rng)]; break;
      default:
        do cp = any(rng);
        while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    s += encode_cp(cp);
  }
  return s;
}

bool is_boundary(const std::string& s, size_t i) {
  return i == s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
}

}  // namespace

TEST_CASE("utf8_complete_prefix holds back only an incomplete valid tail", "[unit]") {
  CHECK(utf8_complete_prefix("") == 0);
  CHECK(utf8_complete_prefix("abc") == 3);
  CHECK(utf8_complete_prefix("a\xE2\x82\xAC") == 4);  // "a€" complete
  CHECK(utf8_complete_prefix("a\xE2\x82") == 1);      // € missing its last byte
  CHECK(utf8_complete_prefix("a\xE2") == 1);
  CHECK(utf8_complete_prefix("\xF0\x9F\xA6") == 0);  // 🦙 missing one byte
  CHECK(utf8_complete_prefix("\xF0\x9F") == 0);
  CHECK(utf8_complete_prefix("\xF0") == 0);
  CHECK(utf8_complete_prefix("\xF0\x9F\xA6\x99") == 4);
  CHECK(utf8_complete_prefix("\xC3") == 0);
  CHECK(utf8_complete_prefix("\xE2\x82\xAC\xE2") == 3);
  // Ill-formed tails that no further byte can repair are not held back.
  CHECK(utf8_complete_prefix("\x80") == 1);   // lone continuation byte
  CHECK(utf8_complete_prefix("a\xC0") == 2);  // C0/C1 never lead
  CHECK(utf8_complete_prefix("\xFF") == 1);
  CHECK(utf8_complete_prefix("\xE0\x80") == 2);  // overlong
  CHECK(utf8_complete_prefix("\xED\xA0") == 2);  // surrogate
  CHECK(utf8_complete_prefix("\xF4\x90") == 2);  // above U+10FFFF
  CHECK(utf8_complete_prefix("\xF5") == 1);
  CHECK(utf8_complete_prefix("\xE2\x41") == 2);              // lead then ASCII
  CHECK(utf8_complete_prefix("\xF0\x9F\xA6\x99\x99") == 5);  // extra continuation byte
}

TEST_CASE("utf8_sanitize replaces maximal subparts with U+FFFD", "[unit]") {
  CHECK(utf8_sanitize("") == "");
  CHECK(utf8_sanitize("plain ascii") == "plain ascii");
  const std::string valid = "h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99";
  CHECK(utf8_sanitize(valid) == valid);
  CHECK(utf8_sanitize("a\xE2\x82") == "a" + kFffd);  // incomplete tail: one U+FFFD
  CHECK(utf8_sanitize("\xF0\x9F\xA6") == kFffd);
  CHECK(utf8_sanitize("\xE2\x82\x61") == kFffd + "a");
  CHECK(utf8_sanitize("\xC0\xAF") == kFffd + kFffd);              // overlong '/'
  CHECK(utf8_sanitize("\xED\xA0\x80") == kFffd + kFffd + kFffd);  // surrogate U+D800
  CHECK(utf8_sanitize("\xFF\xFE") == kFffd + kFffd);
  // Unicode 15, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  CHECK(utf8_sanitize("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64") ==
        "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
}

TEST_CASE("utf8_valid", "[unit]") {
  CHECK(utf8_valid(""));
  CHECK(utf8_valid("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  CHECK(utf8_valid("\xEE\x80\x80"));      // U+E000
  CHECK_FALSE(utf8_valid("\xF4\x90\x80\x80"));
  CHECK_FALSE(utf8_valid("\xED\xBF\xBF"));
  CHECK_FALSE(utf8_valid("\xE2\x82"));
  CHECK_FALSE(utf8_valid("\xC1\xBF"));
}

TEST_CASE("utf8_printable escapes what a message cannot show", "[unit]") {
  CHECK(utf8_printable("\xE2\x96\x81Hello") == "\xE2\x96\x81Hello");
  CHECK(utf8_printable("a\nb\t\x7F") == "a\\x0Ab\\x09\\x7F");
  CHECK(utf8_printable("\"q\" \\") == "\\\"q\\\" \\\\");
  CHECK(utf8_printable("\xF0\x9F\xA6") == "\\xF0\\x9F\\xA6");
  CHECK(utf8_printable("\xC0\xAFok\xF0\x9F\xA6\x99") == "\\xC0\\xAFok\xF0\x9F\xA6\x99");
}

TEST_CASE("UTF-8 helpers: properties on random input", "[unit]") {
  std::mt19937 rng(2024);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string s = random_valid(rng, 1 + static_cast<size_t>(iter % 40));
    REQUIRE(utf8_valid(s));
    REQUIRE(utf8_sanitize(s) == s);
    for (size_t cut = 0; cut <= s.size(); ++cut) {
      // The complete prefix of a cut is the last character boundary at or before it.
      const size_t p = utf8_complete_prefix(std::string_view(s).substr(0, cut));
      size_t want = cut;
      while (!is_boundary(s, want)) --want;
      REQUIRE(p == want);
      const std::string cut_text = utf8_sanitize(s.substr(0, cut));
      REQUIRE(utf8_valid(cut_text));
      REQUIRE(cut_text == s.substr(0, p) + (p < cut ? kFffd : ""));
    }
    // Streaming in random chunks: emit the complete prefix, hold back the rest.
    std::uniform_int_distribution<size_t> chunk(1, 5);
    std::string pending, emitted;
    for (size_t i = 0; i < s.size();) {
      const size_t n = std::min(chunk(rng), s.size() - i);
      pending += s.substr(i, n);
      i += n;
      const size_t p = utf8_complete_prefix(pending);
      REQUIRE(utf8_valid(pending.substr(0, p)));
      emitted += pending.substr(0, p);
      pending.erase(0, p);
      REQUIRE(pending.size() < 4);
    }
    REQUIRE(pending.empty());
    REQUIRE(emitted == s);
  }
  std::uniform_int_distribution<int> byte(0, 255);
  for (int iter = 0; iter < 2000; ++iter) {  // arbitrary bytes
    std::string b;
    for (int n = iter % 12; n > 0; --n) b += static_cast<char>(byte(rng));
    const std::string clean = utf8_sanitize(b);
    REQUIRE(utf8_valid(clean));
    REQUIRE((clean == b) == utf8_valid(b));
    REQUIRE(utf8_complete_prefix(b) + 3 >= b.size());
    REQUIRE(utf8_valid(utf8_printable(b)));
  }
}

TEST_CASE("Streaming byte-fallback tokens never yields invalid UTF-8 (B17)", "[unit]") {
  const std::string path = specchat::test::test_data("tokenizer/ggml-vocab-llama-spm.gguf");
  INFO("conformance data missing: " << path);
  REQUIRE(std::filesystem::exists(path));
  const Tokenizer tok(Vocab::from_gguf(GgufFile::open(path)));
  const Vocab& v = tok.vocab();
  // 🦙 has no piece in Llama-2's vocabulary: four byte tokens each.
  const std::string text = "\xF0\x9F\xA6\x99\xF0\x9F\xA6\x99 ok \xF0\x9F\xA6\x99\xF0\x9F\xA6\x99";
  const std::vector<int32_t> ids = tok.encode(text);
  REQUIRE(ids.size() > 16);
  CHECK(ids[1] == 243);  // <0xF0>
  std::string emitted;
  for (size_t n = 0; n <= ids.size(); ++n) {
    // As a generator stopped after n tokens would: its text so far.
    const std::string bytes = v.decode(
        std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)), true);
    const size_t p = utf8_complete_prefix(bytes);
    INFO("n = " << n);
    REQUIRE(utf8_valid(bytes.substr(0, p)));
    REQUIRE(bytes.substr(0, emitted.size()) == emitted);  // what was streamed stays true
    emitted = bytes.substr(0, p);
    const std::string final_text = utf8_sanitize(bytes);  // stopped here: U+FFFD for the tail
    REQUIRE(utf8_valid(final_text));
    CHECK(final_text == emitted + (p < bytes.size() ? kFffd : ""));
  }
  CHECK(emitted == text);
}
