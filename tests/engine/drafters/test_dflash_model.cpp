// DFlashModel (engine/drafters/dflash_model.h): binding errors name their cause, the forward
// matches an f64 reference written from the contract (docs/design/target-feature-drafters.md)
// for every weight type, and the recipe's PyTorch reference vectors (tests/data/drafters).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/drafters/dflash_fixture.h"
#include "engine/drafters/logit_diff.h"
#include "engine/drafters/sha256.h"
#include "test_paths.h"

using namespace specchat;
using test::DFlashSpec;

namespace {

// Loads a mutated drafter and returns the error it raised (fails the test when none).
DrafterBindError bind_error(const test::GgufBuilder& b, const std::string& name) {
  const std::string path = test::write_dflash(b, name);
  try {
    DFlashModel::load(path, test::tiny_target());
  } catch (const DrafterBindError& e) {
    return e;
  }
  FAIL("the drafter " << name << " was accepted");
  return DrafterBindError(DrafterBindErrorKind::unsupported, "unreachable");
}

void check_error(const test::GgufBuilder& b, const std::string& name, DrafterBindErrorKind kind,
                 const std::string& names) {
  const DrafterBindError e = bind_error(b, name);
  INFO(e.what());
  CHECK(std::string(drafter_bind_error_kind_name(e.kind())) == drafter_bind_error_kind_name(kind));
  CHECK_THAT(e.what(), Catch::Contains(names));
  CHECK_THAT(e.what(), Catch::Contains(name + ".gguf"));  // names the drafter file
}

}  // namespace

TEST_CASE("dflash: a well-formed drafter binds to its target", "[unit][drafters]") {
  const auto m = DFlashModel::load(test::write_dflash(test::dflash_builder(DFlashSpec{}), "ok"), test::tiny_target());
  const DFlashConfig& c = m->config();
  CHECK(c.taps == std::vector<int32_t>{2, 0});  // stored +1, in file order
  CHECK(c.block_size == 5);
  CHECK(c.head_dim == 24);
  CHECK(c.n_vocab == 4096);
  CHECK(m->n_pos() == test::tiny_target().n_ctx() + 5);
  CHECK(m->weight_bytes() > 0);
}

TEST_CASE("dflash: each binding error names its cause", "[unit][drafters]") {
  using K = DrafterBindErrorKind;
  const DFlashSpec s;
  SECTION("missing tensor") {
    auto b = test::dflash_builder(s);
    b.remove_tensor("blk.1.ffn_up.weight");
    check_error(b, "missing-tensor", K::missing_tensor, "blk.1.ffn_up.weight");
  }
  SECTION("tap outside the target's layers") {
    DFlashSpec t = s;
    t.stored_taps = {1, 4};  // the target has 3 layers: stored values are 1 … 3
    check_error(test::dflash_builder(t), "bad-tap", K::bad_tap, "4");
    t.stored_taps = {0, 2};  // 0 = "the embedding": not a tap this contract has
    check_error(test::dflash_builder(t), "zero-tap", K::bad_tap, "0");
  }
  SECTION("fc of the wrong width") {
    auto b = test::dflash_builder(s);
    b.remove_tensor("fc.weight");
    b.add_tensor_f32("fc.weight", {3 * 64, 64}, std::vector<float>(3 * 64 * 64, 0.01f));  // 3 taps' width, 2 taps
    check_error(b, "fc-width", K::wrong_width, "fc.weight");
  }
  SECTION("embedding_length other than the target's width") {
    DFlashSpec t = s;
    t.d_model = 48;
    t.head_dim = 12;
    check_error(test::dflash_builder(t), "width", K::wrong_width, "embedding_length");
  }
  SECTION("sha256 of another file") {
    auto b = test::dflash_builder(s);
    b.set_string("specchat.target.sha256", std::string(64, '0'));
    check_error(b, "sha", K::sha256_mismatch, std::string(64, '0'));
    // The right hash binds, and the check can be switched off.
    b.set_string("specchat.target.sha256", sha256_file_hex(test::tiny_target_path()));
    CHECK_NOTHROW(DFlashModel::load(test::write_dflash(b, "sha-ok"), test::tiny_target()));
    b.set_string("specchat.target.sha256", std::string(64, '0'));
    DFlashOptions o;
    o.check_sha256 = false;
    CHECK_NOTHROW(DFlashModel::load(test::write_dflash(b, "sha-off"), test::tiny_target(), o));
  }
  SECTION("attention bias present") {
    auto b = test::dflash_builder(s);
    b.add_tensor_f32("blk.0.attn_q.bias", {96}, std::vector<float>(96, 0.0f));
    check_error(b, "bias", K::unsupported, "blk.0.attn_q.bias");
  }
  SECTION("sliding window") {
    auto b = test::dflash_builder(s);
    b.set_u32("dflash.attention.sliding_window", 16);
    check_error(b, "window", K::unsupported, "sliding_window");
  }
  SECTION("unknown key or tensor") {
    auto b = test::dflash_builder(s);
    b.set_f32("dflash.rope.scaling.factor", 2.0f);
    check_error(b, "unknown-key", K::unsupported, "dflash.rope.scaling.factor");
    auto c = test::dflash_builder(s);
    c.add_tensor_f32("blk.2.attn_norm.weight", {64}, std::vector<float>(64, 1.0f));  // a third layer
    check_error(c, "unknown-tensor", K::unsupported, "blk.2.attn_norm.weight");
  }
  SECTION("vocabulary of another size") {
    auto b = test::dflash_builder(s);
    b.add_tensor_f32("output.weight", {64, 4000}, std::vector<float>(64 * 4000, 0.0f));
    check_error(b, "head", K::vocab_mismatch, "output.weight");
    auto c = test::dflash_builder(s);
    c.set_u32("specchat.target.n_vocab", 32000);
    check_error(c, "n-vocab", K::vocab_mismatch, "32000");
    auto d = test::dflash_builder(s);
    d.set_u32("tokenizer.ggml.mask_token_id", 4096);
    check_error(d, "mask", K::vocab_mismatch, "mask_token_id");
  }
  SECTION("other architecture, keys and shapes") {
    auto b = test::dflash_builder(s);
    b.set_string("general.architecture", "llama");
    check_error(b, "arch", K::wrong_architecture, "llama");
    auto c = test::dflash_builder(s);
    c.set_string("specchat.target.architecture", "qwen3");
    check_error(c, "target-arch", K::target_mismatch, "qwen3");
    auto d = test::dflash_builder(s);
    d.remove("dflash.block_size");
    check_error(d, "no-block-size", K::missing_key, "dflash.block_size");
    auto e = test::dflash_builder(s);
    e.tensor("blk.0.attn_k.weight").ne = {64, 24};  // one KV head's rows, file has two
    e.tensor("blk.0.attn_k.weight").data.resize(64 * 24 * 4);
    check_error(e, "k-shape", K::wrong_shape, "blk.0.attn_k.weight");
  }
  SECTION("a target without a file") {
    ModelConfig c = test::tiny_target().config();
    LlamaModel::Options o;
    o.n_ctx = 32;
    auto random = LlamaModel::random(c, o, 3);
    const std::string path = test::write_dflash(test::dflash_builder(s), "random-target");
    try {
      DFlashModel::load(path, *random);
      FAIL("bound to a random target");
    } catch (const DrafterBindError& e) {
      CHECK(e.kind() == K::target_unreadable);
    }
  }
}

TEST_CASE("dflash: the forward matches an f64 reference for every weight type", "[unit][drafters]") {
  for (DType type : {DType::f32, DType::f16, DType::bf16, DType::q8_0}) {
    DFlashSpec s;
    s.type = type;
    s.seed = 100 + static_cast<uint64_t>(type);
    const std::string path = test::write_dflash(test::dflash_builder(s), std::string("fwd-") + dtype_name(type));
    // f32 activations: the forward is f32 arithmetic on the file's values, ~1e-6 from f64. (The
    // default q8 activations on Q8_0 weights are checked below.)
    DFlashOptions o;
    o.activations = cpu::Activations::f32;
    const auto m = DFlashModel::load(path, test::tiny_target(), o);
    const GgufFile f = GgufFile::open(path);
    const GgufFile tf = GgufFile::open(test::tiny_target_path());
    // Hidden rows in an order other than the drafter's taps, plus a layer it does not read.
    const test::OwnedHidden h = test::random_hidden({0, 1, 2}, 40, 64, 7 + static_cast<uint64_t>(type));
    const auto feats = [&](int i, int t) { return h.row(m->config().taps[static_cast<size_t>(t)], i); };
    DFlashState st = m->new_state();
    // 37 + 3 rows: crosses the 32-row chunk of append_context.
    m->append_context(st, 0, h.view(0, 37));
    m->append_context(st, 37, h.view(37, 3));
    REQUIRE(st.n_rows() == 40);
    const int B = m->block_size(), nv = 4096;
    std::vector<float> got(static_cast<size_t>(B - 1) * nv);
    INFO("weights " << dtype_name(type));
    for (const auto& [n_ctx, anchor] : {std::pair{40, 17}, std::pair{12, 950}}) {
      st.truncate(n_ctx);
      m->draft_block(st, anchor, n_ctx, got);
      const std::vector<double> want = test::dflash_reference(f, tf, n_ctx, feats, anchor, n_ctx);
      double err = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::fabs(got[i] - want[i]));
        scale = std::max(scale, std::fabs(want[i]));
      }
      INFO("context rows " << n_ctx << ": max |error| " << err << ", max |logit| " << scale);
      CHECK(scale > 0.5);  // not trivially zero
      // f32 sums of at most a few hundred O(1) products against f64: ~1e-6 expected.
      CHECK(err <= 1e-4);
      CHECK(st.n_rows() == n_ctx);  // block rows are never kept
    }
    // Rows re-appended after a truncation equal the first ones.
    st.truncate(12);
    m->append_context(st, 12, h.view(12, 28));
    std::vector<float> again(got.size());
    m->draft_block(st, 17, 40, again);
    DFlashState fresh = m->new_state();
    m->append_context(fresh, 0, h.view());
    m->draft_block(fresh, 17, 40, got);
    double diff = 0;
    for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(again[i] - got[i])));
    CHECK(diff <= 1e-5);  // the same rows, projected in other chunks (summation order may differ)
  }
}

TEST_CASE("dflash: the default q8 activations on Q8_0 weights stay in the llama.cpp class", "[unit][drafters]") {
  DFlashSpec s;
  s.type = DType::q8_0;
  s.seed = 100 + static_cast<uint64_t>(DType::q8_0);
  const std::string path = test::write_dflash(test::dflash_builder(s), "fwd-q8act");
  const auto m = DFlashModel::load(path, test::tiny_target());  // default options: q8
  const GgufFile f = GgufFile::open(path);
  const GgufFile tf = GgufFile::open(test::tiny_target_path());
  const test::OwnedHidden h = test::random_hidden({0, 1, 2}, 40, 64, 7 + static_cast<uint64_t>(DType::q8_0));
  const auto feats = [&](int i, int t) { return h.row(m->config().taps[static_cast<size_t>(t)], i); };
  DFlashState st = m->new_state();
  m->append_context(st, 0, h.view(0, 40));
  std::vector<float> got(static_cast<size_t>(m->block_size() - 1) * 4096);
  m->draft_block(st, 17, 40, got);
  const std::vector<double> want = test::dflash_reference(f, tf, 40, feats, 17, 40);
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  // Rounding every matrix input to 8 bits: 4.3e-2 normalized measured on this random drafter
  // (its logits are the output of three rounded matrix products); 8e-2 is about twice that, as
  // tests/data/quant/tolerances.json sets the llama.cpp-class tier at twice llama.cpp's error.
  INFO("max |error| " << err << ", max |logit| " << scale);
  CHECK(scale > 0.5);
  CHECK(err / scale <= 8e-2);
  CHECK(err / scale > 1e-4);  // the integer path ran (f32 activations are ~1e-6 from f64)
}

TEST_CASE("dflash: forward argument errors", "[unit][drafters]") {
  const auto m = DFlashModel::load(test::write_dflash(test::dflash_builder(DFlashSpec{}), "args"), test::tiny_target());
  DFlashState st = m->new_state();
  const test::OwnedHidden h = test::random_hidden({0, 2}, 4, 64, 1);
  CHECK_THROWS_AS(m->append_context(st, 1, h.view()), std::invalid_argument);  // gap
  const test::OwnedHidden missing = test::random_hidden({0, 1}, 4, 64, 1);
  CHECK_THROWS_AS(m->append_context(st, 0, missing.view()), std::invalid_argument);  // tap 2 absent
  const test::OwnedHidden narrow = test::random_hidden({0, 2}, 4, 32, 1);
  CHECK_THROWS_AS(m->append_context(st, 0, narrow.view()), std::invalid_argument);
  m->append_context(st, 0, h.view());
  std::vector<float> logits(static_cast<size_t>(4) * 4096);
  CHECK_THROWS_AS(m->draft_block(st, 5, 3, logits), std::invalid_argument);        // anchor inside the context
  CHECK_THROWS_AS(m->draft_block(st, 4096, 4, logits), std::invalid_argument);     // token out of range
  CHECK_THROWS_AS(m->draft_block(st, 5, m->n_pos() - 4, logits), std::invalid_argument);  // block past n_pos
  std::vector<float> small(10);
  CHECK_THROWS_AS(m->draft_block(st, 5, 4, small), std::invalid_argument);
  CHECK_THROWS_AS(m->draft_block(st, 5, 4, logits, 5), std::invalid_argument);  // B − 1 = 4 rows at most
  CHECK_NOTHROW(m->draft_block(st, 5, 4, logits));
  // Fewer rows: the same first rows.
  std::vector<float> two(static_cast<size_t>(2) * 4096);
  m->draft_block(st, 5, 4, two, 2);
  double diff = 0;
  for (size_t i = 0; i < two.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(two[i] - logits[i])));
  CHECK(diff <= 1e-5);
}

// The recipe's PyTorch forward on the bundled target (resources/models/recipe/export_drafters.py
// --refs): context rows from the engine's own target forward, as the engine will feed them.
TEST_CASE("dflash: logits match the recipe's reference vectors", "[model][drafters]") {
  const std::string gguf = test::test_data("drafters/dflash-ref.gguf"), json = test::test_data("drafters/ref.json");
  if (!std::filesystem::exists(gguf) || !std::filesystem::exists(json)) {
    WARN("SKIPPED: tests/data/drafters/dflash-ref.gguf or ref.json is absent (written by "
         "resources/models/recipe/export_drafters.py --refs)");
    return;
  }
  std::ifstream in(json);
  const nlohmann::json ref = nlohmann::json::parse(in);
  const double tol = ref.at("tolerance").get<double>();
  LlamaModel::Options o;
  o.n_threads = 2;
  auto target = LlamaModel::load(test::target_model(), o);
  // Binding checks the sha256 the recipe wrote (Python's hashlib) against ours.
  const auto m = DFlashModel::load(gguf, *target);
  CHECK(m->block_size() == ref.at("block_size").get<int>());
  CHECK(m->config().taps == ref.at("taps").get<std::vector<int32_t>>());
  const int B = m->block_size(), nv = target->config().n_vocab, d = target->config().d_model;
  REQUIRE(ref.at("cases").size() >= 1);
  for (const auto& c : ref.at("cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const int n = static_cast<int>(ids.size());
    target->kv(0).truncate(0);
    Batch b = Batch::chain(std::span<const int32_t>(ids).first(static_cast<size_t>(n - 1)), 0, true);
    const Batch* one[1] = {&b};
    const std::vector<int32_t> taps = m->config().taps;
    const ForwardOut out = target->forward(one, taps);
    HiddenRows h;
    h.taps = taps;
    h.data = out.hidden.data();
    h.n_rows = n - 1;
    h.d_model = d;
    h.tap_stride = static_cast<size_t>(n - 1) * static_cast<size_t>(d);
    DFlashState st = m->new_state();
    m->append_context(st, 0, h);
    std::vector<float> got(static_cast<size_t>(B - 1) * nv);
    m->draft_block(st, ids.back(), n - 1, got);
    const auto& want = c.at("dflash_logits");
    REQUIRE(want.size() == static_cast<size_t>(B - 1));
    double err = 0;
    for (int j = 0; j < B - 1; ++j) {
      const auto row = want[static_cast<size_t>(j)].get<std::vector<double>>();
      REQUIRE(row.size() == static_cast<size_t>(nv));
      for (int v = 0; v < nv; ++v) err = std::max(err, std::fabs(got[static_cast<size_t>(j) * nv + v] - row[static_cast<size_t>(v)]));
    }
    INFO("case of " << n << " tokens: max |error| " << err);
    CHECK(err <= tol);
  }
}

// The bundled block drafter's products run on panels (its F16 matrices packed at load) and its
// LM head is the target's packed one, shared; with SPECCHAT_CPU_PACK=0 both stay row-major in
// the mappings. The logits agree up to summation order either way.
TEST_CASE("dflash: the bundled drafter packs its matrices and shares the target's packed LM head", "[model][drafters]") {
  const std::string path = test::models_dir() + "/specchat-dflash.gguf";
  if (!std::filesystem::exists(path)) {
    WARN("SKIPPED: " << path << " is absent");
    return;
  }
  LlamaModel::Options o;
  o.n_ctx = 256;
  o.n_threads = 2;
  DFlashOptions dopt;
  dopt.check_sha256 = false;
  auto run = [&](bool pack, std::vector<float>& logits) {
    if (!pack) ::setenv("SPECCHAT_CPU_PACK", "0", 1);
    auto target = LlamaModel::load(test::target_model(), o);
    const auto m = DFlashModel::load(path, *target, dopt);
    ::unsetenv("SPECCHAT_CPU_PACK");
    if (pack) {
      CHECK(target->packed_lm_head().keep != nullptr);
      CHECK(m->shares_target_head());
      // 2 layers of d 320 (Q, K, V, O, gate, up, down) and fc (960 -> 320), F16: ~4.6 MB.
      CHECK(m->packed_bytes() > 4'000'000);
    } else {
      CHECK(target->packed_lm_head().keep == nullptr);
      CHECK_FALSE(m->shares_target_head());
      CHECK(m->packed_bytes() == 0);
    }
    const test::OwnedHidden h = test::random_hidden(m->config().taps, 30, m->config().d_model, 11);
    DFlashState st = m->new_state();
    m->append_context(st, 0, h.view());
    logits.assign(static_cast<size_t>(m->block_size() - 1) * static_cast<size_t>(m->config().n_vocab), 0.0f);
    m->draft_block(st, 42, 30, logits);
  };
  test::check_packed_matches_row_major(run);
}
