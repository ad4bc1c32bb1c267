// Vocab: reading tokenizer.ggml.* from GGUF, token bytes, hash, and the draft/target rule
// (FAULT-KINDS B05, B06) on GGUF mutations written with the test GGUF writer.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf.h"
#include "engine/utf8.h"
#include "engine/vocab.h"
#include "gguf_writer.h"
#include "test_data_files.h"
#include "test_paths.h"

using namespace specchat;
using specchat::test::GgufBuilder;

namespace {

std::string llama_vocab_path() {
  return specchat::test::require_test_data("tokenizer/ggml-vocab-llama-spm.gguf");
}

// The tokenizer.ggml.* keys of `v`, as a converter writes them.
GgufBuilder builder_for(const Vocab& v) {
  GgufBuilder b;
  std::vector<int32_t> types;
  for (TokenType t : v.types) types.push_back(static_cast<int32_t>(t));
  b.set_string("tokenizer.ggml.model", v.model)
      .set_string_array("tokenizer.ggml.tokens", v.pieces)
      .set_f32_array("tokenizer.ggml.scores", v.scores)
      .set_i32_array("tokenizer.ggml.token_type", types)
      .set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id))
      .set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id))
      .set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(v.unk_id))
      .set_bool("tokenizer.ggml.add_bos_token", v.add_bos)
      .set_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (v.eot_id >= 0) b.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot_id));
  if (!v.chat_template.empty()) b.set_string("tokenizer.chat_template", v.chat_template);
  return b;
}

Vocab read(const GgufBuilder& b) {
  return Vocab::from_gguf(GgufFile::from_bytes(b.build(), "mutated"));
}

// A small SentencePiece-style vocabulary with every token type.
Vocab tiny_vocab() {
  Vocab v;
  v.model = "llama";
  v.pieces = {"<unk>",
              "<s>",
              "</s>",
              "<|user|>",
              "<0x0A>",
              "<0xE2>",
              "<0x82>",
              "<0xAC>",
              "\xE2\x96\x81",
              "\xE2\x96\x81Hello",
              "\xE2\x96\x81world",
              "!",
              "<extra_0>",
              "<pad>"};
  v.types = {TokenType::unknown, TokenType::control, TokenType::control, TokenType::user_defined,
             TokenType::byte,    TokenType::byte,    TokenType::byte,    TokenType::byte,
             TokenType::normal,  TokenType::normal,  TokenType::normal,  TokenType::normal,
             TokenType::control, TokenType::unused};
  v.scores.assign(v.pieces.size(), 0.0f);
  v.eot_id = 3;
  return v;
}

}  // namespace

TEST_CASE("Vocab::from_gguf reads the Llama-2 vocabulary", "[unit]") {
  const Vocab v = Vocab::from_gguf(GgufFile::open(llama_vocab_path()));
  CHECK(v.model == "llama");
  REQUIRE(v.size() == 32000);
  CHECK(v.scores.size() == 32000);
  CHECK(v.types.size() == 32000);
  CHECK(v.bos_id == 1);
  CHECK(v.eos_id == 2);
  CHECK(v.unk_id == 0);
  CHECK(v.eot_id == -1);
  CHECK(v.add_bos);
  CHECK(v.add_space_prefix);  // key absent: default
  CHECK(v.chat_template.empty());
  CHECK(v.types[0] == TokenType::unknown);
  CHECK(v.types[1] == TokenType::control);
  CHECK(v.types[2] == TokenType::control);
  CHECK(v.types[3] == TokenType::byte);
  CHECK(v.types[258] == TokenType::byte);
  CHECK(v.types[259] == TokenType::normal);
  CHECK(v.pieces[13] == "<0x0A>");
  CHECK(v.pieces[29871] == "\xE2\x96\x81");
  CHECK(v.pieces[15043] == "\xE2\x96\x81Hello");
  CHECK(v.is_eog(2));
  CHECK_FALSE(v.is_eog(1));
}

TEST_CASE("Vocab::from_gguf defaults and optional keys", "[unit]") {
  GgufBuilder b;
  b.set_string("tokenizer.ggml.model", "llama")
      .set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  Vocab v = read(b);
  CHECK(v.scores == std::vector<float>(4, 0.0f));
  CHECK(v.types == std::vector<TokenType>(4, TokenType::normal));
  CHECK(v.bos_id == 1);
  CHECK(v.eos_id == 2);
  CHECK(v.unk_id == 0);
  CHECK(v.eot_id == -1);
  CHECK(v.add_bos);
  CHECK(v.add_space_prefix);

  b.set_u32("tokenizer.ggml.eot_token_id", 3)
      .set_bool("tokenizer.ggml.add_bos_token", false)
      .set_bool("tokenizer.ggml.add_space_prefix", false)
      .set_string("tokenizer.chat_template", "specchat");
  v = read(b);
  CHECK(v.eot_id == 3);
  CHECK(v.is_eog(3));
  CHECK_FALSE(v.add_bos);
  CHECK_FALSE(v.add_space_prefix);
  CHECK(v.chat_template == "specchat");
}

TEST_CASE("Vocab::from_gguf names the missing or invalid key", "[unit]") {
  GgufBuilder good = builder_for(tiny_vocab());
  auto refused_with = [](const GgufBuilder& b, const std::string& what) {
    try {
      read(b);
      FAIL("accepted; expected an error naming " << what);
    } catch (const VocabError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  SECTION("no tokens") {
    refused_with(GgufBuilder(good).remove("tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
  }
  SECTION("no model") {
    refused_with(GgufBuilder(good).remove("tokenizer.ggml.model"), "tokenizer.ggml.model");
  }
  SECTION("empty tokens") {
    refused_with(GgufBuilder(good).set_string_array("tokenizer.ggml.tokens", {}),
                 "tokenizer.ggml.tokens");
  }
  SECTION("tokens of the wrong type") {
    refused_with(GgufBuilder(good).set_i32_array("tokenizer.ggml.tokens", {1, 2}),
                 "tokenizer.ggml.tokens");
  }
  SECTION("scores of another length") {
    refused_with(GgufBuilder(good).set_f32_array("tokenizer.ggml.scores", {0.0f}),
                 "tokenizer.ggml.scores");
  }
  SECTION("unknown token type") {
    std::vector<int32_t> t(tiny_vocab().pieces.size(), 1);
    t[5] = 9;
    refused_with(GgufBuilder(good).set_i32_array("tokenizer.ggml.token_type", t), "token 5");
  }
  SECTION("special id outside the vocabulary") {
    refused_with(GgufBuilder(good).set_u32("tokenizer.ggml.eos_token_id", 14),
                 "tokenizer.ggml.eos_token_id");
  }
  SECTION("dropping only the last token leaves the arrays of different lengths") {
    std::vector<std::string> p = tiny_vocab().pieces;
    p.pop_back();
    refused_with(GgufBuilder(good).set_string_array("tokenizer.ggml.tokens", p), "has 14 entries");
  }
}

TEST_CASE("Vocab::token_bytes and decode", "[unit]") {
  const Vocab v = tiny_vocab();
  CHECK(v.token_bytes(0).empty());  // unknown
  CHECK(v.token_bytes(1).empty());  // control
  CHECK(v.token_bytes(3) == "<|user|>");
  CHECK(v.token_bytes(4) == "\n");
  CHECK(v.token_bytes(5) == "\xE2");
  CHECK(v.token_bytes(8) == " ");
  CHECK(v.token_bytes(9) == " Hello");
  CHECK(v.token_bytes(13) == "<pad>");  // unused pieces keep their text
  CHECK_THROWS_AS(v.token_bytes(-1), std::out_of_range);
  CHECK_THROWS_AS(v.token_bytes(14), std::out_of_range);

  CHECK(v.decode({1, 9, 10, 11, 5, 6, 7, 4, 2}) == " Hello world!\xE2\x82\xAC\n");
  CHECK(v.decode({1, 9, 10, 11}, true) == "Hello world!");  // dummy prefix dropped
  CHECK(v.decode({8, 9}, true) == " Hello");                // only one space is the prefix
  CHECK(v.decode({1, 8, 9}, true) == " Hello");             // control pieces come first
  CHECK(v.decode({4, 9}, true) == "\n Hello");              // a byte piece ends the prefix
  CHECK(v.decode({3, 9}, true) == "<|user|> Hello");        // not at the start: kept
  CHECK(v.decode({5, 6}) == "\xE2\x82");                    // incomplete UTF-8 is kept
  CHECK(v.decode({}).empty());
}

TEST_CASE("Vocab::hash is FNV-1a over model, pieces, types and special ids", "[unit]") {
  Vocab v;
  v.model = "llama";
  v.pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81Hi"};
  v.types = {TokenType::unknown, TokenType::control, TokenType::control, TokenType::normal};
  v.scores = {0, 0, 0, -1};
  // Pinned: stored with messages, so it must not change between versions (value computed
  // independently from the documented byte order).
  CHECK(v.hash() == 0xddedc37598583261ULL);

  Vocab w = v;
  w.scores[3] = -5;  // scores do not change what an id means
  CHECK(w.hash() == v.hash());
  w = v;
  w.pieces[3] = "\xE2\x96\x81Ho";
  CHECK(w.hash() != v.hash());
  w = v;
  w.types[3] = TokenType::user_defined;
  CHECK(w.hash() != v.hash());
  w = v;
  w.eos_id = 1;
  CHECK(w.hash() != v.hash());
  w = v;
  w.eot_id = 3;
  CHECK(w.hash() != v.hash());
  w = v;
  w.model = "gpt2";
  CHECK(w.hash() != v.hash());
  w = v;
  w.pieces = {"<unk>", "<s>", "</s>\xE2\x96\x81", "Hi"};  // same bytes, other boundaries
  CHECK(w.hash() != v.hash());
}

TEST_CASE("check_draft_vocab refuses the B05 mutations of a real vocabulary", "[unit]") {
  const GgufFile f = GgufFile::open(llama_vocab_path());
  const Vocab target = Vocab::from_gguf(f);
  const GgufBuilder base = GgufBuilder::from_file(f);

  const VocabCheck same = check_draft_vocab(target, read(base));
  CHECK(same.ok);
  CHECK(same.error.empty());
  CHECK(same.warnings.empty());

  auto refused = [&](const GgufBuilder& b, std::vector<std::string> named) {
    const VocabCheck c = check_draft_vocab(target, read(b));
    INFO(c.error);
    CHECK_FALSE(c.ok);
    for (const auto& s : named) CHECK(c.error.find(s) != std::string::npos);
  };
  std::vector<std::string> tokens = target.pieces;
  SECTION("drop the last token (all three arrays)") {
    std::vector<std::string> p = tokens;
    p.pop_back();
    std::vector<float> s = target.scores;
    s.pop_back();
    std::vector<int32_t> t(31999, 1);
    for (int i = 0; i < 31999; ++i)
      t[static_cast<size_t>(i)] = static_cast<int32_t>(target.types[static_cast<size_t>(i)]);
    refused(GgufBuilder(base)
                .set_string_array("tokenizer.ggml.tokens", p)
                .set_f32_array("tokenizer.ggml.scores", s)
                .set_i32_array("tokenizer.ggml.token_type", t),
            {"32000", "31999"});
  }
  SECTION("change the string of one normal token") {
    tokens[15043] = "\xE2\x96\x81Hallo";
    refused(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", tokens),
            {"token 15043", "\"\xE2\x96\x81Hello\"", "\"\xE2\x96\x81Hallo\"", "normal"});
  }
  SECTION("swap two token strings: the first differing id is named") {
    std::swap(tokens[3186], tokens[15043]);
    refused(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", tokens),
            {"token 3186", "\xE2\x96\x81world", "\xE2\x96\x81Hello"});
  }
  SECTION("change the model from llama to gpt2") {
    refused(GgufBuilder(base).set_string("tokenizer.ggml.model", "gpt2"), {"llama", "gpt2"});
  }
  SECTION("a piece with ill-formed UTF-8 is named in a message that stays valid UTF-8") {
    tokens[15043] = "\xE2\x96\x81Hel\xF0\x9F";
    refused(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", tokens),
            {"token 15043", "\"\xE2\x96\x81Hel\\xF0\\x9F\""});
    CHECK(utf8_valid(check_draft_vocab(target, read(GgufBuilder(base).set_string_array(
                                                   "tokenizer.ggml.tokens", tokens)))
                         .error));
  }
  SECTION("change a byte token") {
    tokens[13] = "<0x0B>";
    refused(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", tokens),
            {"token 13", "<0x0A>", "<0x0B>", "byte"});
  }
  SECTION("change the EOS id (B06 b)") {
    refused(GgufBuilder(base).set_u32("tokenizer.ggml.eos_token_id", 1), {"EOS", "2", "1"});
  }
  SECTION("change a NORMAL token to CONTROL (B06 c)") {
    std::vector<int32_t> t;
    for (TokenType x : target.types) t.push_back(static_cast<int32_t>(x));
    t[1000] = static_cast<int32_t>(TokenType::control);
    refused(GgufBuilder(base).set_i32_array("tokenizer.ggml.token_type", t),
            {"token 1000", "normal", "control"});
  }
  SECTION("flip add_bos_token (B06 d)") {
    refused(GgufBuilder(base).set_bool("tokenizer.ggml.add_bos_token", false), {"add_bos_token"});
  }
  SECTION("rename the EOS control token: refused although both are CONTROL") {
    tokens[2] = "<|endoftext|>";
    refused(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", tokens), {"token 2"});
  }
}

TEST_CASE("check_draft_vocab accepts differences in CONTROL/UNUSED tokens with warnings",
          "[unit]") {
  const Vocab target = tiny_vocab();
  GgufBuilder base = builder_for(target);
  CHECK(read(base).hash() == target.hash());  // the builder round-trips the vocabulary

  SECTION("rename an unused CONTROL token (B06 a)") {
    std::vector<std::string> p = target.pieces;
    p[12] = "<extra_1>";
    const VocabCheck c = check_draft_vocab(
        target, read(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", p)));
    INFO(c.error);
    CHECK(c.ok);
    REQUIRE(c.warnings.size() == 1);
    CHECK(c.warnings[0].find("token 12") != std::string::npos);
    CHECK(c.warnings[0].find("<extra_0>") != std::string::npos);
    CHECK(c.warnings[0].find("<extra_1>") != std::string::npos);
  }
  SECTION("CONTROL in one file, UNUSED in the other, and a renamed UNUSED token") {
    std::vector<std::string> p = target.pieces;
    p[13] = "<pad2>";
    std::vector<int32_t> t;
    for (TokenType x : target.types) t.push_back(static_cast<int32_t>(x));
    t[12] = static_cast<int32_t>(TokenType::unused);
    const VocabCheck c =
        check_draft_vocab(target, read(GgufBuilder(base)
                                           .set_string_array("tokenizer.ggml.tokens", p)
                                           .set_i32_array("tokenizer.ggml.token_type", t)));
    CHECK(c.ok);
    REQUIRE(c.warnings.size() == 2);
    CHECK(c.warnings[0].find("token 12") != std::string::npos);
    CHECK(c.warnings[1].find("token 13") != std::string::npos);
  }
  SECTION("a renamed EOT (CONTROL or not) is refused") {
    Vocab t2 = target, d2 = target;
    t2.types[3] = d2.types[3] = TokenType::control;
    d2.pieces[3] = "<|eot|>";
    const VocabCheck c = check_draft_vocab(t2, d2);
    CHECK_FALSE(c.ok);
    CHECK(c.error.find("token 3") != std::string::npos);
    CHECK(c.warnings.empty());
  }
  SECTION("EOT ids differ") {
    const VocabCheck c =
        check_draft_vocab(target, read(GgufBuilder(base).remove("tokenizer.ggml.eot_token_id")));
    CHECK_FALSE(c.ok);
    CHECK(c.error.find("EOT ids differ: target 3, draft -1") != std::string::npos);
  }
  SECTION("a renamed USER_DEFINED token is refused") {
    std::vector<std::string> p = target.pieces;
    p[3] = "<|usr|>";
    const VocabCheck c = check_draft_vocab(
        target, read(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", p)));
    CHECK_FALSE(c.ok);
    CHECK(c.error.find("token 3") != std::string::npos);
  }
  SECTION("a differing UNKNOWN token is refused") {
    std::vector<std::string> p = target.pieces;
    p[0] = "<unknown>";
    const VocabCheck c = check_draft_vocab(
        target, read(GgufBuilder(base).set_string_array("tokenizer.ggml.tokens", p)));
    CHECK_FALSE(c.ok);
    CHECK(c.error.find("token 0") != std::string::npos);
  }
  SECTION("a refusal drops the warnings gathered before it") {
    std::vector<std::string> p = target.pieces;
    p[12] = "<extra_1>";
    p[13] = "<pad2>";
    std::vector<int32_t> t;
    for (TokenType x : target.types) t.push_back(static_cast<int32_t>(x));
    t[13] = static_cast<int32_t>(TokenType::normal);  // UNUSED -> NORMAL: refused
    const VocabCheck c =
        check_draft_vocab(target, read(GgufBuilder(base)
                                           .set_string_array("tokenizer.ggml.tokens", p)
                                           .set_i32_array("tokenizer.ggml.token_type", t)));
    CHECK_FALSE(c.ok);
    CHECK(c.error.find("token 13") != std::string::npos);
    CHECK(c.warnings.empty());
  }
  SECTION("scores may differ: they only steer encoding, which uses the target's tokenizer") {
    std::vector<float> s(target.pieces.size(), -1.0f);
    const VocabCheck c = check_draft_vocab(
        target, read(GgufBuilder(base).set_f32_array("tokenizer.ggml.scores", s)));
    CHECK(c.ok);
    CHECK(c.warnings.empty());
  }
}
