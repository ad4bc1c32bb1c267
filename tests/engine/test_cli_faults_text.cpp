// specchat-cli against the fault kinds of the project's FAULT-KINDS.md (shared design cases): text, prompts and stops (B07, B12, B13, B15, B17).
// Every test runs the real binary as a child process and checks each JSON result against the
// statistics invariants of B22/B23 (cli_faults_util.h).
#include <catch2/catch.hpp>

#include "cli_faults_util.h"

using namespace specchat::test::cli_faults;

// ---------------------------------------------------------------------------------------------
// B07: a stop string wins over the length cap wherever it falls in an accepted block.

namespace {

struct StopCase {
  std::string prompt;
  std::vector<int32_t> base;   // greedy baseline tokens
  std::vector<size_t> start;   // byte offset of each token in bytes_of(base) (+ the end)
  std::string full;            // bytes_of(base)
};

StopCase greedy_baseline(const std::string& prompt, int n) {
  StopCase c;
  c.prompt = prompt;
  c.base = toks(run_ok(cli("generate", {"--draft-k", "0", "--temp", "0", "-n", S(n), "--prompt", prompt})).json);
  for (int32_t id : c.base) {
    c.start.push_back(c.full.size());
    c.full += vocab().token_bytes(id);
  }
  c.start.push_back(c.full.size());
  return c;
}

bool has_alpha(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); });
}

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
}

// Checks one side of a stop run: the output is the baseline cut before token `kept`, when the
// stop lies inside the budget (needs `kept + 1` tokens), else the first n tokens.
void expect_stop_cut(const json& r, const StopCase& c, const std::string& stop, int kept, int n) {
  INFO("kept " << kept << " n " << n << " stop '" << stop << "': " << r.dump());
  const auto got = toks(r);
  if (n >= kept + 1) {
    CHECK(r.at("finish_reason") == "stop");
    CHECK(r.at("n_generated").get<int>() == kept);
    CHECK(got == prefix(c.base, static_cast<size_t>(kept)));
    const std::string text = r.at("text").get<std::string>();
    CHECK(text == utf8_sanitize(c.full.substr(0, c.start[static_cast<size_t>(kept)])));
    CHECK(text.find(stop) == std::string::npos);
  } else {
    CHECK(r.at("finish_reason") == "length");
    CHECK(r.at("n_generated").get<int>() == n);
    CHECK(got == prefix(c.base, static_cast<size_t>(n)));
  }
}

}  // namespace

TEST_CASE("cli B07: a stop string inside the last block ends generation there, for every k and n",
          "[model][cli]") {
  const int n_base = 32;
  // A prompt whose greedy output has a word-like token j whose text first occurs exactly there.
  StopCase c;
  int j = -1;
  std::string stop;
  for (const char* prompt : {"Once upon a time", "Tom has a red ball.", "The little dog", "Lily and Tom",
                             "One day, a girl"}) {
    c = greedy_baseline(prompt, n_base);
    for (size_t i = 3; i + 4 <= c.base.size() && j < 0; ++i) {
      const std::string s = vocab().token_bytes(c.base[i]);
      if (s.size() >= 2 && is_ascii(s) && has_alpha(s) && c.full.find(s) == c.start[i]) {
        j = static_cast<int>(i);
        stop = s;
      }
    }
    if (j >= 0) break;
  }
  INFO("prompt '" << c.prompt << "' stop '" << stop << "' at token " << j << " of '" << c.full << "'");
  REQUIRE(j >= 0);

  // The stop is token j's text: j tokens are kept once the budget reaches token j.
  for (int k : {1, 2, 4, 8, 16}) {
    for (int n = j - 1; n <= j + 3; ++n) {
      INFO("k " << k << " -n " << n);
      const json r = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", c.prompt,
                                            "--stop", stop}))
                         .json;
      expect_identical(r);
      expect_stop_cut(r.at("baseline"), c, stop, j, n);
      expect_stop_cut(r.at("speculative"), c, stop, j, n);
    }
  }

  // Streaming (no --json) holds back text that may start the stop, and never shows it.
  for (int k : {1, 4, 8}) {
    INFO("streamed, k " << k);
    CHECK(streamed_text({"--draft-k", S(k), "--temp", "0", "-n", S(j + 3), "--prompt", c.prompt, "--stop", stop}) ==
          c.full.substr(0, c.start[static_cast<size_t>(j)]));
  }

  // A stop that starts inside token i-1 and ends in token i: token i-1 reaches into it, so only
  // i-1 tokens are kept.
  int i2 = -1;
  std::string stop2;
  for (size_t i = 3; i + 4 <= c.base.size() && i2 < 0; ++i) {
    const std::string prev = vocab().token_bytes(c.base[i - 1]);
    const std::string s = c.full.substr(c.start[i - 1] + 1, c.start[i + 1] - c.start[i - 1] - 1);
    if (prev.size() >= 2 && is_ascii(prev) && is_ascii(s) && c.full.find(s) == c.start[i - 1] + 1) {
      i2 = static_cast<int>(i);
      stop2 = s;
    }
  }
  INFO("spanning stop '" << stop2 << "' ending in token " << i2);
  REQUIRE(i2 >= 0);
  for (int k : {1, 4, 8}) {
    for (int n : {i2, i2 + 1, i2 + 3}) {
      INFO("k " << k << " -n " << n);
      const json r = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", c.prompt,
                                            "--stop", stop2}))
                         .json;
      expect_identical(r);
      // Kept: i2 - 1 tokens, once the budget reaches token i2 (n >= i2 + 1).
      for (const char* side : {"baseline", "speculative"}) {
        const json& s = r.at(side);
        INFO(side << ": " << s.dump());
        const auto got = toks(s);
        if (n >= i2 + 1) {
          CHECK(s.at("finish_reason") == "stop");
          CHECK(got == prefix(c.base, static_cast<size_t>(i2 - 1)));
          CHECK(s.at("text").get<std::string>().find(stop2) == std::string::npos);
        } else {
          CHECK(s.at("finish_reason") == "length");
          CHECK(got == prefix(c.base, static_cast<size_t>(n)));
        }
      }
    }
    INFO("streamed, k " << k);
    CHECK(streamed_text({"--draft-k", S(k), "--temp", "0", "-n", S(i2 + 3), "--prompt", c.prompt, "--stop", stop2}) ==
          c.full.substr(0, c.start[static_cast<size_t>(i2 - 1)]));
  }
}

// ---------------------------------------------------------------------------------------------
// B12: a prompt longer than the context is a typed error; prompts at the boundary work.

namespace {

// Text whose encoding has exactly m tokens ("the the the ...").
std::string text_of_tokens(int m) {
  std::string s = "the";
  for (int i = 1; i < m; ++i) s += " the";
  REQUIRE(tokenizer().encode(s).size() == static_cast<size_t>(m));
  return s;
}

}  // namespace

TEST_CASE("cli B12: a prompt longer than the context is refused - prompts at the boundary work",
          "[model][cli]") {
  std::string words;
  for (int i = 0; i < 5000; ++i) words += "word ";
  const json e = run_error(cli("generate", {"-n", "8", "--draft-k", "4", "--prompt", words}));
  CHECK(e.at("kind") == "prompt_too_long");
  CHECK_THAT(e.at("message").get<std::string>(), Contains("context is"));
  CHECK_THAT(e.at("message").get<std::string>(), Contains("prompt has"));

  // Boundaries, with a small context: L = C + 1 is refused; L = C, C - 1 and C - k fit, and
  // generation stops with the context full after C + 1 - L tokens (the last token needs no slot).
  REQUIRE(vocab().add_bos);
  const int C = 48, k = 4, N = 16;
  {
    const json e2 = run_error(cli("compare", {"--ctx", S(C), "--draft-k", S(k), "-n", S(N), "--prompt",
                                              text_of_tokens(C)}));
    CHECK(e2.at("kind") == "prompt_too_long");
    CHECK_THAT(e2.at("message").get<std::string>(), Contains("prompt has " + S(C + 1) + " tokens, context is " + S(C)));
  }
  struct Boundary {
    int L, k;
    std::string draft;
  };
  std::vector<Boundary> cases;
  for (int L : {C, C - 1, C - 2, C - k, C - k - 1}) cases.push_back({L, k, ""});
  for (int L : {C, C - 5}) cases.push_back({L, 16, ""});  // drafts clipped to the room left
  if (ngram_supported()) {
    for (int L : {C, C - 5}) cases.push_back({L, 16, "ngram"});
  }
  for (const Boundary& b : cases) {
    const int L = b.L;
    INFO("prompt of " << L << " tokens, --ctx " << C << ", k " << b.k << " " << b.draft);
    const json j = run_ok(cli("compare", {"--ctx", S(C), "--draft-k", S(b.k), "-n", S(N), "--prompt",
                                          text_of_tokens(L - 1)},
                              "", b.draft))
                       .json;
    expect_identical(j);
    for (const char* side : {"baseline", "speculative"}) {
      const json& r = j.at(side);
      INFO(side << ": " << r.dump());
      CHECK(r.at("n_prompt") == L);
      const int room = std::min(N, C + 1 - L);
      if (r.at("finish_reason") != "eos") {
        CHECK(r.at("n_generated").get<int>() == room);
        CHECK(r.at("finish_reason") == (room < N ? "context_full" : "length"));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B13: empty and whitespace prompts.

TEST_CASE("cli B13: an empty prompt is a BOS-only context - zero tokens without BOS is an error",
          "[model][cli]") {
  REQUIRE(vocab().add_bos);
  {
    const json r = run_ok(cli("generate", {"--draft-k", "4", "-n", "10", "--prompt", ""})).json;
    CHECK(r.at("prompt_tokens") == json::array({vocab().bos_id}));
    expect_length(r, 10);
    expect_identical(run_ok(cli("compare", {"--draft-k", "4", "-n", "10", "--prompt", ""})).json);
  }
  for (const std::string s : {" ", "\n"}) {
    INFO("prompt '" << s << "'");
    const json r = run_ok(cli("generate", {"--draft-k", "4", "-n", "10", "--prompt", s})).json;
    std::vector<int32_t> want{vocab().bos_id};
    for (int32_t id : tokenizer().encode(s)) want.push_back(id);
    CHECK(r.at("prompt_tokens").get<std::vector<int32_t>>() == want);
    expect_length(r, 10);
  }
  // Both models without BOS: "" has no tokens at all, which must be a typed error.
  TempDir tmp("b13");
  const std::string t = tmp.file("target-no-bos.gguf"), d = tmp.file("draft-no-bos.gguf");
  GgufBuilder::from_file(GgufFile::open(models().target)).set_bool("tokenizer.ggml.add_bos_token", false).write_file(t);
  GgufBuilder::from_file(GgufFile::open(models().draft)).set_bool("tokenizer.ggml.add_bos_token", false).write_file(d);
  for (const char* sub : {"generate", "compare"}) {
    INFO(sub);
    const json e = run_error(cli(sub, {"--draft-k", "4", "-n", "10", "--prompt", ""}, t, d));
    CHECK(e.at("kind") == "empty_prompt");
  }
  // ... while a non-empty prompt still runs on that pair.
  expect_identical(run_ok(cli("compare", {"--draft-k", "4", "-n", "8", "--prompt", "Once upon a time"}, t, d)).json);
}

// ---------------------------------------------------------------------------------------------
// B15: the CLI reports the prompt ids the engine's SentencePiece tokenizer gives.

TEST_CASE("cli B15: prompt_tokens are BOS + the tokenizer's ids, spaces kept", "[model][cli]") {
  for (const std::string s : {"   Hello", "Hello world", " Hello world", "a  b   c    d", "\tx\n\ny"}) {
    INFO("prompt '" << s << "'");
    const json r = run_ok(cli("generate", {"-n", "0", "--prompt", s})).json;
    const std::vector<int32_t> ids = tokenizer().encode(s);
    std::vector<int32_t> want;
    if (vocab().add_bos) want.push_back(vocab().bos_id);
    want.insert(want.end(), ids.begin(), ids.end());
    CHECK(r.at("prompt_tokens").get<std::vector<int32_t>>() == want);
    CHECK(r.at("n_prompt") == static_cast<int>(want.size()));
    CHECK(tokenizer().decode(ids) == s);
  }
}

// ---------------------------------------------------------------------------------------------
// B17: cutting generation inside a byte-fallback character never breaks the JSON.

TEST_CASE("cli B17: N cuts through byte-fallback characters give valid UTF-8 JSON and identity",
          "[model][cli]") {
  // A character no vocabulary piece contains: the tokenizer can only spell it in bytes.
  std::string ch;
  for (const std::string cand : {"\xF0\x9F\x98\x80", "\xE6\xBC\xA2", "\xE2\x82\xAC", "\xD0\xB6", "\xC3\xA9"}) {
    const bool in_piece = std::any_of(vocab().pieces.begin(), vocab().pieces.end(),
                                      [&](const std::string& p) { return p.find(cand) != std::string::npos; });
    if (!in_piece) {
      ch = cand;
      break;
    }
  }
  REQUIRE_FALSE(ch.empty());
  const std::string prompt = ch + ch + ch + ch;
  size_t n_byte_ids = 0;
  for (int32_t id : tokenizer().encode(prompt)) {
    n_byte_ids += vocab().types[static_cast<size_t>(id)] == TokenType::byte ? 1 : 0;
  }
  CHECK(n_byte_ids == prompt.size());
  bool generated_bytes = false;
  for (int n = 1; n <= 16; ++n) {
    INFO("-n " << n);
    const json j = run_ok(cli("compare", {"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", prompt})).json;
    expect_identical(j);
    for (const char* side : {"baseline", "speculative"}) {
      const json& r = j.at(side);
      const auto ids = toks(r);
      // The ids are kept exactly; only an incomplete tail of their bytes becomes U+FFFD.
      CHECK(r.at("text").get<std::string>() == utf8_sanitize(bytes_of(ids)));
      for (int32_t id : ids) generated_bytes |= vocab().types[static_cast<size_t>(id)] == TokenType::byte;
    }
  }
  if (!generated_bytes) {
    WARN("the model emitted no byte-fallback token after '" << prompt
                                                            << "'; the swapped-byte-piece case below cuts inside characters");
  }
}

TEST_CASE("cli B17: cuts inside multi-byte characters the model does emit (byte pieces swapped in)",
          "[model][cli]") {
  // The bundled models rarely emit byte-fallback tokens, so make them: the ids they emit from a
  // BOS-only context do not depend on the vocabulary's strings, so swapping the entries of those
  // ids with the byte pieces of U+6F22 (E6 BC A2) in *both* files turns the same greedy ids into
  // multi-byte text. Cutting with -n then lands inside characters.
  const json base = run_ok(cli("generate", {"--draft-k", "0", "--temp", "0", "-n", "16", "--prompt", ""})).json;
  const auto g = toks(base);
  std::map<int32_t, int> count;
  for (int32_t id : g) {
    if (vocab().types[static_cast<size_t>(id)] == TokenType::normal) ++count[id];
  }
  REQUIRE_FALSE(count.empty());
  std::vector<int32_t> chosen{std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                                return a.second < b.second;
                              })->first};  // the most frequent becomes the lead byte
  for (int32_t id : g) {
    if (chosen.size() < 3 && count.count(id) && std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
      chosen.push_back(id);
    }
  }
  const char* byte_pieces[] = {"<0xE6>", "<0xBC>", "<0xA2>"};
  std::vector<int32_t> byte_ids;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const auto it = std::find(vocab().pieces.begin(), vocab().pieces.end(), std::string(byte_pieces[i]));
    REQUIRE(it != vocab().pieces.end());
    byte_ids.push_back(static_cast<int32_t>(it - vocab().pieces.begin()));
    REQUIRE(vocab().types[static_cast<size_t>(byte_ids.back())] == TokenType::byte);
  }
  TempDir tmp("b17");
  auto swapped = [&](const std::string& from, const std::string& to) {
    const GgufFile f = GgufFile::open(from);
    auto t = f.get_string_array("tokenizer.ggml.tokens");
    auto sc = f.get_f32_array("tokenizer.ggml.scores");
    auto ty = f.get_i32_array("tokenizer.ggml.token_type");
    for (size_t i = 0; i < chosen.size(); ++i) {
      const auto a = static_cast<size_t>(chosen[i]), b = static_cast<size_t>(byte_ids[i]);
      std::swap(t[a], t[b]);
      std::swap(sc[a], sc[b]);
      std::swap(ty[a], ty[b]);
    }
    GgufBuilder::from_file(f)
        .set_string_array("tokenizer.ggml.tokens", t)
        .set_f32_array("tokenizer.ggml.scores", sc)
        .set_i32_array("tokenizer.ggml.token_type", ty)
        .write_file(to);
  };
  const std::string t = tmp.file("target-bytes.gguf"), d = tmp.file("draft-bytes.gguf");
  swapped(models().target, t);
  swapped(models().draft, d);
  const Vocab mv = Vocab::from_gguf(GgufFile::open(t));
  int cut_inside = 0;
  for (int n = 1; n <= 16; ++n) {
    INFO("-n " << n);
    const test::CliResult r = run_ok(cli("compare", {"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", ""}, t, d));
    expect_identical(r.json);
    for (const char* side : {"baseline", "speculative"}) {
      const json& s = r.json.at(side);
      INFO(side << ": " << s.dump());
      const auto ids = toks(s);
      CHECK(ids == prefix(g, static_cast<size_t>(n)));  // the ids are the model's, exactly
      std::string bytes;
      for (int32_t id : ids) bytes += mv.token_bytes(id);
      CHECK(s.at("text").get<std::string>() == utf8_sanitize(bytes));
      if (utf8_complete_prefix(bytes) < bytes.size()) ++cut_inside;
    }
    // Streamed, the same text arrives in valid UTF-8 pieces.
    CHECK(streamed_text({"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", ""}, t, d) ==
          r.json.at("speculative").at("text").get<std::string>());
  }
  CHECK(cut_inside > 0);  // some -n really ended inside a character
}
