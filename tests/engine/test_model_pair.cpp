// Drafts across a family (issue 11 item 5): a draft whose vocabulary matches the target's is
// accepted, also when the two differ only by trailing padding entries (UNUSED, as converters pad
// the embedding rows); anything else is refused with the reason. With padding, speculative
// greedy output still equals the target's own, token for token, in both directions (the draft
// proposes only shared ids; a target id the draft lacks reaches the draft as its unknown token).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "engine/generator.h"
#include "engine/model_pair.h"
#include "tiny_model.h"

using namespace specchat;
using test::GgufBuilder;
using test::TinySpec;

namespace {

namespace fs = std::filesystem;

std::string tmp_file(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("specchat-model-pair-" + std::to_string(getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write(const GgufBuilder& b, const std::string& name) {
  const std::string p = tmp_file(name);
  b.write_file(p);
  return p;
}

TinySpec target_spec(int pad) {
  TinySpec s;
  s.d_model = 64;
  s.n_layer = 2;
  s.pad_vocab = pad;
  s.seed = 21;
  s.n_ctx = 96;
  return s;
}

TinySpec draft_spec(int pad) {
  TinySpec s;
  s.d_model = 32;
  s.n_layer = 1;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.pad_vocab = pad;
  s.seed = 22;
  s.n_ctx = 96;
  return s;
}

const std::vector<int32_t> kPrompt = {1, 759, 525, 265, 429, 4035, 398, 303};

std::vector<int32_t> greedy(ModelPair& mp, int draft_k) {
  Generator g(*mp.target, draft_k > 0 ? mp.draft.get() : nullptr);
  GenerateRequest req;
  req.prompt = kPrompt;
  req.max_tokens = 40;
  req.spec.draft_k = draft_k;
  return g.generate(req).tokens;
}

bool mentions(const std::vector<std::string>& lines, const std::string& s) {
  for (const std::string& l : lines) {
    if (l.find(s) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a draft whose vocabulary differs only by trailing padding is accepted, and greedy identity holds", "[unit][model_pair]") {
  SECTION("draft has more padding than the target") {
    PairOptions o;
    o.target_path = write(test::tiny_model(target_spec(0)), "t.gguf");
    o.draft_path = write(test::tiny_model(draft_spec(24)), "d.gguf");
    ModelPair mp = ModelPair::load(o);
    CHECK(mentions(mp.warnings, "trailing padding"));
    CHECK(mp.draft->config().n_vocab == mp.target->config().n_vocab + 24);
    CHECK(greedy(mp, 4) == greedy(mp, 0));
  }
  SECTION("target has more padding than the draft, and emits a padding id") {
    GgufBuilder t = test::tiny_model(target_spec(16));
    PairOptions o;
    o.target_path = write(t, "t.gguf");
    o.draft_path = write(test::tiny_model(draft_spec(0)), "d.gguf");
    std::vector<int32_t> base;
    {
      ModelPair mp = ModelPair::load(o);
      base = greedy(mp, 0);
    }
    // Make padding id 4100 win where the target's first token did: its output row = 2x that
    // token's row (a padding entry a real model never emits, here forced so the draft has to
    // read an id it lacks).
    REQUIRE(!base.empty());
    GgufBuilder::Tensor& out = t.tensor("output.weight");
    const size_t row = out.ne[0] * sizeof(float);
    std::vector<float> src(out.ne[0]);
    std::memcpy(src.data(), out.data.data() + static_cast<size_t>(base[0]) * row, row);
    for (float& x : src) x *= 2.0f;
    std::memcpy(out.data.data() + 4100 * row, src.data(), row);
    o.target_path = write(t, "t2.gguf");
    ModelPair mp = ModelPair::load(o);
    CHECK(mentions(mp.warnings, "trailing padding"));
    const std::vector<int32_t> want = greedy(mp, 0);
    REQUIRE(std::find(want.begin(), want.end(), 4100) != want.end());
    CHECK(greedy(mp, 4) == want);
  }
}

TEST_CASE("a draft whose extra vocabulary entries are not padding is refused with the reason", "[unit][model_pair]") {
  GgufBuilder d = test::tiny_model(draft_spec(0));
  test::pad_vocabulary(d, 8, 1);  // NORMAL entries, not padding
  for (const char* name : {"token_embd.weight", "output.weight"}) {
    GgufBuilder::Tensor& t = d.tensor(name);
    t.ne[1] += 8;
    t.data.resize(t.data.size() + 8 * t.ne[0] * sizeof(float), 0);
  }
  PairOptions o;
  o.target_path = write(test::tiny_model(target_spec(0)), "t.gguf");
  o.draft_path = write(d, "d.gguf");
  try {
    ModelPair::load(o);
    FAIL("the pair loaded");
  } catch (const VocabError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("vocab_mismatch") != std::string::npos);
    CHECK(m.find("4096") != std::string::npos);
    CHECK(m.find("4104") != std::string::npos);
    CHECK(m.find("not padding") != std::string::npos);
  }
}

TEST_CASE("check_draft_vocab: the padding rule in both directions, and the shared range still compared", "[unit][model_pair]") {
  const Vocab base = Vocab::from_gguf(GgufFile::from_bytes(test::tiny_model(draft_spec(0)).build()));
  Vocab padded = base;
  for (int i = 0; i < 5; ++i) {
    padded.pieces.push_back("[PAD" + std::to_string(padded.pieces.size()) + "]");
    padded.scores.push_back(0);
    padded.types.push_back(TokenType::unused);
  }
  CHECK(check_draft_vocab(base, padded).ok);
  CHECK(check_draft_vocab(padded, base).ok);
  Vocab control_tail = padded;
  control_tail.types.back() = TokenType::control;
  const VocabCheck no = check_draft_vocab(base, control_tail);
  CHECK_FALSE(no.ok);
  CHECK(no.error.find("not padding") != std::string::npos);
  Vocab changed = padded;
  changed.pieces[300] = "\xE2\x96\x81" "different";
  const VocabCheck no2 = check_draft_vocab(base, changed);
  CHECK_FALSE(no2.ok);
  CHECK(no2.error.find("token 300") != std::string::npos);
}
