// specchat-cli against the fault kinds of the project's FAULT-KINDS.md (shared design cases): vocabularies and model files (B05, B06, B19).
// Every test runs the real binary as a child process and checks each JSON result against the
// statistics invariants of B22/B23 (cli_faults_util.h).
#include <catch2/catch.hpp>

#include "cli_faults_util.h"

using namespace specchat::test::cli_faults;

// ---------------------------------------------------------------------------------------------
// B05: a draft with another vocabulary is refused before generating, naming the difference.

TEST_CASE("cli B05: draft vocabulary mutations are refused with the mismatch named", "[model][cli]") {
  TempDir tmp("b05");
  const GgufFile src = GgufFile::open(models().draft);
  const Vocab& dv = draft_vocab();
  const int32_t n = dv.size();
  const int32_t x = normal_id(dv, n / 4);
  REQUIRE(x > 0);
  const auto tokens = src.get_string_array("tokenizer.ggml.tokens");
  const auto scores = src.get_f32_array("tokenizer.ggml.scores");
  const auto types = src.get_i32_array("tokenizer.ggml.token_type");
  const Args gen_args{"-n", "4", "--draft-k", "4", "--prompt", "Once upon a time"};

  // Control: the draft rewritten without changes is accepted, so refusals below come from the
  // mutations alone.
  {
    const std::string path = tmp.file("unchanged.gguf");
    GgufBuilder::from_file(src).write_file(path);
    run_ok(cli("generate", gen_args, models().target, path));
  }

  auto drop_last = [&](GgufBuilder& b) {
    b.set_string_array("tokenizer.ggml.tokens", std::vector<std::string>(tokens.begin(), tokens.end() - 1));
    b.set_f32_array("tokenizer.ggml.scores", std::vector<float>(scores.begin(), scores.end() - 1));
    b.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(types.begin(), types.end() - 1));
  };
  struct Case {
    std::string name;
    std::function<void(GgufBuilder&)> mutate;
    std::set<std::string> kinds;         // accepted error kinds
    std::vector<std::string> must_name;  // substrings of the message
  };
  const std::vector<Case> cases = {
      // A self-consistent draft with one token fewer (embedding and output rows dropped too):
      // the pair check itself must name both sizes.
      {"drop the last token (whole model)",
       [&](GgufBuilder& b) {
         drop_last(b);
         for (const char* name : {"token_embd.weight", "output.weight"}) {
           if (!src.tensor(name)) continue;
           GgufBuilder::Tensor& t = b.tensor(name);
           REQUIRE(t.ne.size() == 2);
           REQUIRE(t.ne[1] == static_cast<uint64_t>(n));
           const size_t row = t.data.size() / static_cast<size_t>(n);
           t.ne[1] = static_cast<uint64_t>(n - 1);
           t.data.resize(t.data.size() - row);
         }
         if (b.has("llama.vocab_size")) b.set_u32("llama.vocab_size", static_cast<uint32_t>(n - 1));
       },
       {"vocab_mismatch"},
       {S(n), S(n - 1), "draft"}},
      // Only the tokenizer arrays shortened: the file contradicts its own tensors. Refused when
      // the draft loads (the message names the draft and the sizes), before any pair check.
      {"drop the last token (tokenizer arrays only)", drop_last,
       {"vocab_mismatch", "vocab_error", "model_error"},
       {S(n), S(n - 1), "draft"}},
      {"change one normal token's string",
       [&](GgufBuilder& b) {
         auto t = tokens;
         t[static_cast<size_t>(x)] = "\xE2\x96\x81specchatmutated";
         b.set_string_array("tokenizer.ggml.tokens", t);
       },
       {"vocab_mismatch"},
       {"token " + S(x)}},
      {"swap two token strings",
       [&](GgufBuilder& b) {
         auto t = tokens;
         std::swap(t[static_cast<size_t>(x)], t[static_cast<size_t>(x) + 1]);
         b.set_string_array("tokenizer.ggml.tokens", t);
       },
       {"vocab_mismatch"},
       {"token " + S(x)}},
      {"tokenizer.ggml.model llama -> gpt2",
       [&](GgufBuilder& b) { b.set_string("tokenizer.ggml.model", "gpt2"); },
       {"vocab_mismatch"},
       {"gpt2", "llama"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string path = tmp.file("mutated.gguf");
    GgufBuilder b = GgufBuilder::from_file(src);
    c.mutate(b);
    b.write_file(path);
    for (const char* sub : {"generate", "compare"}) {
      INFO(sub);
      const json e = run_error(cli(sub, gen_args, models().target, path));
      INFO(e.dump());
      CHECK(c.kinds.count(e.at("kind").get<std::string>()) == 1);
      for (const std::string& s : c.must_name) CHECK_THAT(e.at("message").get<std::string>(), Contains(s));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B06: special-token differences follow the rule documented at check_draft_vocab.

TEST_CASE("cli B06: an unused CONTROL token may differ (warned) - EOS, NORMAL->CONTROL, add_bos may not",
          "[model][cli]") {
  TempDir tmp("b06");
  const Vocab& tv = vocab();
  const Vocab& dv = draft_vocab();
  const GgufFile dsrc = GgufFile::open(models().draft);
  const auto dtokens = dsrc.get_string_array("tokenizer.ggml.tokens");
  const auto dtypes = dsrc.get_i32_array("tokenizer.ggml.token_type");
  const Args gen_args{"-n", "24", "--draft-k", "4", "--temp", "0", "--prompt", "Once upon a time"};
  const std::string renamed = "<specchat_renamed_control>";

  SECTION("(a) rename an unused CONTROL token: accepted, warned, lossless") {
    // An unused CONTROL token: CONTROL in both files and not BOS/EOS/EOT.
    int32_t c = -1;
    for (int32_t id = 0; id < tv.size() && c < 0; ++id) {
      const auto i = static_cast<size_t>(id);
      if (tv.types[i] == TokenType::control && dv.types[i] == TokenType::control && id != tv.bos_id &&
          !tv.is_eog(id)) {
        c = id;
      }
    }
    std::string target = models().target;
    const std::string draft = tmp.file("draft-renamed-control.gguf");
    auto dt = dtokens;
    auto dty = dtypes;
    if (c < 0) {
      // The bundled vocabulary has no such token (its only CONTROL tokens are BOS and EOS), so
      // make one: the last NORMAL id becomes CONTROL in *both* files, then the draft renames it.
      for (int32_t id = tv.size() - 1; id >= 0 && c < 0; --id) {
        if (tv.types[static_cast<size_t>(id)] == TokenType::normal) c = id;
      }
      REQUIRE(c >= 0);
      const GgufFile tsrc = GgufFile::open(models().target);
      auto tty = tsrc.get_i32_array("tokenizer.ggml.token_type");
      tty[static_cast<size_t>(c)] = static_cast<int32_t>(TokenType::control);
      target = tmp.file("target-control.gguf");
      GgufBuilder::from_file(tsrc).set_i32_array("tokenizer.ggml.token_type", tty).write_file(target);
      dty[static_cast<size_t>(c)] = static_cast<int32_t>(TokenType::control);
    }
    INFO("control id " << c);
    dt[static_cast<size_t>(c)] = renamed;
    GgufBuilder::from_file(dsrc)
        .set_string_array("tokenizer.ggml.tokens", dt)
        .set_i32_array("tokenizer.ggml.token_type", dty)
        .write_file(draft);
    const test::CliResult r = run_ok(cli("compare", gen_args, target, draft));
    expect_identical(r.json);
    const auto warnings = r.json.at("warnings").get<std::vector<std::string>>();
    INFO(r.describe());
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains("token " + S(c)));
    CHECK_THAT(r.err, Contains("warning:"));
    CHECK_THAT(r.err, Contains("token " + S(c)));
  }

  SECTION("(a') the same rule in process (check_draft_vocab), incl. a renamed BOS") {
    Vocab t = tv, d = tv;
    const int32_t c = normal_id(tv, tv.size() / 2);
    REQUIRE(c > 0);
    const auto ci = static_cast<size_t>(c);
    t.types[ci] = d.types[ci] = TokenType::control;
    d.pieces[ci] = renamed;
    const VocabCheck ok = check_draft_vocab(t, d);
    CHECK(ok.ok);
    REQUIRE(ok.warnings.size() == 1);
    CHECK_THAT(ok.warnings[0], Contains("token " + S(c)));
    // UNUSED counts as never emitted too.
    t.types[ci] = d.types[ci] = TokenType::unused;
    CHECK(check_draft_vocab(t, d).ok);
    // BOS and EOS are CONTROL but never a tolerated difference.
    for (int32_t special : {tv.bos_id, tv.eos_id}) {
      Vocab d2 = tv;
      d2.pieces[static_cast<size_t>(special)] = renamed;
      const VocabCheck no = check_draft_vocab(tv, d2);
      CHECK_FALSE(no.ok);
      CHECK_THAT(no.error, Contains("token " + S(special)));
    }
  }

  SECTION("(b) a different EOS id is refused") {
    const int32_t other = normal_id(dv, 100);
    REQUIRE(other > 0);
    const std::string draft = tmp.file("draft-eos.gguf");
    GgufBuilder::from_file(dsrc).set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(other)).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("EOS"));
    CHECK_THAT(e.at("message").get<std::string>(), Contains(S(other)));
  }

  SECTION("(c) a NORMAL token that is CONTROL in the draft is refused") {
    const int32_t x = normal_id(dv, 300);
    REQUIRE(x > 0);
    auto dty = dtypes;
    dty[static_cast<size_t>(x)] = static_cast<int32_t>(TokenType::control);
    const std::string draft = tmp.file("draft-normal-to-control.gguf");
    GgufBuilder::from_file(dsrc).set_i32_array("tokenizer.ggml.token_type", dty).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("token " + S(x)));
  }

  SECTION("(d) a flipped add_bos_token is refused") {
    const std::string draft = tmp.file("draft-add-bos.gguf");
    GgufBuilder::from_file(dsrc).set_bool("tokenizer.ggml.add_bos_token", !dv.add_bos).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("add_bos"));
  }
}

// ---------------------------------------------------------------------------------------------
// B19: a cut-off GGUF is a typed error naming the file, as target and as draft.

TEST_CASE("cli B19: truncated model files are typed errors, the draft's naming the draft", "[model][cli]") {
  TempDir tmp("b19");
  const GgufFile src = GgufFile::open(models().target);
  GgufLayout lay;
  const GgufBuilder builder = GgufBuilder::from_file(src);
  const std::vector<uint8_t> bytes = builder.build(&lay);
  REQUIRE(lay.size == bytes.size());
  // Control: the rewritten file itself loads.
  const std::string whole = tmp.file("whole.gguf");
  GgufBuilder::write_bytes(whole, bytes);
  run_ok(cli("generate", {"-n", "1", "--prompt", "x"}, whole, "none"));

  size_t tokens_kv = 0;  // from_file writes the metadata in key order
  for (const auto& [key, value] : src.metadata()) {
    if (key == "tokenizer.ggml.tokens") break;
    ++tokens_kv;
  }
  REQUIRE(tokens_kv < lay.kv_value_start.size());
  const struct {
    const char* where;
    uint64_t size;
  } cuts[] = {
      {"at 90%", lay.size * 9 / 10},
      {"inside the header", 12},
      {"inside the tokens array", lay.kv_value_start[tokens_kv] + 100},
      {"exactly at the start of tensor data", lay.data_start},
      {"1 byte short", lay.size - 1},
  };
  for (const auto& cut : cuts) {
    INFO("cut " << cut.where << " (" << cut.size << " of " << lay.size << " bytes)");
    const std::string path = tmp.file("cut.gguf");
    GgufBuilder::write_bytes(path, GgufBuilder::truncated(bytes, cut.size));
    // The first tensor whose data lies past the cut, for data_past_end messages.
    std::string first_bad;
    for (size_t i = 0; i < builder.tensors().size() && first_bad.empty(); ++i) {
      if (lay.tensor_data_start[i] + builder.tensors()[i].data.size() > cut.size) first_bad = builder.tensors()[i].name;
    }
    for (const bool as_draft : {false, true}) {
      INFO((as_draft ? "as --draft" : "as --model"));
      const json e = as_draft ? run_error(cli("generate", {"-n", "1", "--prompt", "x"}, models().target, path))
                              : run_error(cli("generate", {"-n", "1", "--prompt", "x"}, path));
      const std::string kind = e.at("kind").get<std::string>(), msg = e.at("message").get<std::string>();
      INFO(e.dump());
      CHECK((kind == "truncated" || kind == "data_past_end"));
      CHECK_THAT(msg, Contains(path));
      if (as_draft) CHECK_THAT(msg, Contains("draft"));
      if (kind == "data_past_end") {
        CHECK(cut.size >= lay.data_start);
        CHECK_THAT(msg, Contains("'" + first_bad + "'"));
        CHECK_THAT(msg, Contains("expected file size " + S(static_cast<long long>(lay.size))));
        CHECK_THAT(msg, Contains("actual " + S(static_cast<long long>(cut.size))));
      }
    }
  }
}
