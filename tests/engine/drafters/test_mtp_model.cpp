// The MTP head's loader (typed binding errors against a tiny target) and its forward against
// an independent f64 reference of the contract (docs/design/target-feature-drafters.md).
#include <catch2/catch.hpp>

#include <fstream>

#include "mtp_fixture.h"
#include "logit_diff.h"
#include "engine/drafters/mtp_model.h"
#include "engine/drafters/sha256.h"

using namespace specchat;
using namespace specchat::test;

namespace {

// Loads the head written from `f` against the target; returns the kind it is refused with
// (fails the test when it loads) and checks what() names `named`.
DrafterBindErrorKind refusal(const TempDir& dir, const MtpFile& f, const LlamaModel& target, const std::string& named) {
  const std::string p = dir.file("mtp.gguf");
  f.write(p);
  try {
    MtpModel::load(p, target);
  } catch (const DrafterBindError& e) {
    INFO(e.what());
    CHECK(std::string(e.what()).find(named) != std::string::npos);
    return e.kind();
  }
  FAIL("the head loaded");
  return DrafterBindErrorKind::wrong_architecture;
}

}  // namespace

TEST_CASE("mtp loader: a well-formed head binds, each defect is a typed, named error", "[unit][mtp]") {
  TempDir dir("mtp-load");
  TinyTarget t = tiny_target(dir);
  const LlamaModel& target = *t.model;
  using K = DrafterBindErrorKind;
  {
    const MtpFile good = random_mtp({});
    good.write(dir.file("good.gguf"));
    auto m = MtpModel::load(dir.file("good.gguf"), target);
    CHECK(m->config().d_model == 64);
    CHECK(m->config().n_vocab == target.config().n_vocab);
    CHECK(m->config().head_dim == 16);
  }
  SECTION("another architecture") {
    MtpFile f = random_mtp({});
    f.kv["general.architecture"] = gguf_value::string("llama");
    CHECK(refusal(dir, f, target, "llama") == K::wrong_architecture);
  }
  SECTION("a missing tensor is named") {
    MtpFile f = random_mtp({});
    f.drop("blk.0.nextn.eh_proj.weight");
    CHECK(refusal(dir, f, target, "blk.0.nextn.eh_proj.weight") == K::missing_tensor);
    MtpFile g = random_mtp({});
    g.drop("blk.0.ffn_down.weight");
    CHECK(refusal(dir, g, target, "blk.0.ffn_down.weight") == K::missing_tensor);
  }
  SECTION("a head of another width") {
    MtpSpec s;
    s.d_model = 32;
    s.n_head = 2;
    s.n_head_kv = 1;
    CHECK(refusal(dir, random_mtp(s), target, "embedding_length") == K::wrong_width);
  }
  SECTION("a tensor of the wrong shape is named") {
    MtpFile f = random_mtp({});
    GgufOutTensor* e = f.find("blk.0.nextn.eh_proj.weight");
    REQUIRE(e);
    *e = f32_tensor(e->name, {64, 64}, std::vector<float>(64 * 64, 0.01f));  // [d, d], not [2d, d]
    CHECK(refusal(dir, f, target, "blk.0.nextn.eh_proj.weight") == K::wrong_width);
  }
  SECTION("binding keys: vocabulary, architecture") {
    MtpFile f = random_mtp({});
    f.kv["specchat.target.n_vocab"] = gguf_value::uint(GgufType::u32, 32000);
    CHECK(refusal(dir, f, target, "32000") == K::vocab_mismatch);
    MtpFile g = random_mtp({});
    g.kv["specchat.target.architecture"] = gguf_value::string("qwen3");
    CHECK(refusal(dir, g, target, "qwen3") == K::target_mismatch);
    MtpFile ok = random_mtp({});
    ok.kv["specchat.target.n_vocab"] = gguf_value::uint(GgufType::u32, 4096);
    ok.kv["specchat.target.architecture"] = gguf_value::string("llama");
    ok.write(dir.file("ok.gguf"));
    CHECK_NOTHROW(MtpModel::load(dir.file("ok.gguf"), target));
  }
  SECTION("sha256 of the target file") {
    // SHA-256 itself: FIPS 180-2's "abc" vector.
    {
      std::ofstream(dir.file("abc.txt"), std::ios::binary) << "abc";
    }
    CHECK(sha256_file_hex(dir.file("abc.txt")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    MtpFile f = random_mtp({});
    f.kv["specchat.target.sha256"] = gguf_value::string(std::string(64, '0'));
    CHECK(refusal(dir, f, target, "sha256") == K::sha256_mismatch);
    MtpFile ok = random_mtp({});
    std::string want = sha256_file_hex(t.path);
    for (char& c : want) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));  // case-insensitive
    ok.kv["specchat.target.sha256"] = gguf_value::string(want);
    ok.write(dir.file("ok.gguf"));
    CHECK_NOTHROW(MtpModel::load(dir.file("ok.gguf"), target));
  }
  SECTION("what the head does not run is refused by name") {
    MtpFile f = random_mtp({});
    f.tensors.push_back(f32_tensor("blk.0.attn_q.bias", {64}, std::vector<float>(64, 0.0f)));
    CHECK(refusal(dir, f, target, "blk.0.attn_q.bias") == K::unsupported);
    MtpFile g = random_mtp({});
    g.kv["specchat-mtp.attention.sliding_window"] = gguf_value::uint(GgufType::u32, 16);
    CHECK(refusal(dir, g, target, "sliding_window") == K::unsupported);
    MtpFile h = random_mtp({});
    h.kv["specchat-mtp.block_count"] = gguf_value::uint(GgufType::u32, 2);
    CHECK(refusal(dir, h, target, "block_count") == K::unsupported);
    MtpFile r = random_mtp({});
    r.kv["specchat-mtp.rope.dimension_count"] = gguf_value::uint(GgufType::u32, 8);
    CHECK(refusal(dir, r, target, "dimension_count") == K::unsupported);
  }
  SECTION("a target without a file") {
    ModelConfig c;
    c.n_vocab = 4096;
    c.d_model = 64;
    c.n_layer = 1;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.d_ff = 96;
    c.n_ctx_train = 64;
    LlamaModel::Options o;
    auto rnd = LlamaModel::random(c, o, 3);
    CHECK(refusal(dir, random_mtp({}), *rnd, "embedding") == K::target_unreadable);
  }
}

TEST_CASE("mtp forward: context rows and recursive rows match an f64 reference", "[unit][mtp]") {
  TempDir dir("mtp-fwd");
  TinyTarget t = tiny_target(dir);
  LlamaModel& target = *t.model;
  const MtpFile f = random_mtp({});
  f.write(dir.file("mtp.gguf"));
  auto model = MtpModel::load(dir.file("mtp.gguf"), target);
  const GgufFile head = GgufFile::open(dir.file("mtp.gguf")), tf = GgufFile::open(t.path);
  const int d = target.config().d_model;
  const size_t nv = static_cast<size_t>(target.config().n_vocab);

  const std::vector<int32_t> ctx = {1, 517, 98, 3001, 42, 7, 1999, 260, 12, 845};
  const int n = static_cast<int>(ctx.size());
  MtpDrafter dr(model, target, 0);
  CHECK(dr.target_taps() == std::vector<int32_t>{target.config().n_layer - 1});
  // Observed in two parts, as prefill and a later verification hand them over.
  observe_context(dr, target, std::span<const int32_t>(ctx).first(6));
  CHECK(dr.n_observed() == 5);
  observe_context(dr, target, ctx);
  REQUIRE(dr.n_observed() == n - 1);

  // Reference rows: context rows 0..n−2 (h = the target's, token t_{i+1}), then the recursive
  // rows of a drafted path (h = g of the previous row).
  const std::vector<float> hid = target_hidden(target, ctx, n - 1);
  const std::vector<int32_t> path = {33, 2048, 5};
  std::vector<std::vector<float>> h;
  std::vector<int32_t> tok;
  for (int i = 0; i < n - 1; ++i) {
    h.emplace_back(hid.begin() + static_cast<std::ptrdiff_t>(i) * d, hid.begin() + static_cast<std::ptrdiff_t>(i + 1) * d);
    tok.push_back(ctx[static_cast<size_t>(i) + 1]);
  }
  for (int32_t p : path) {
    h.emplace_back();
    tok.push_back(p);
  }
  std::vector<double> g_ref;
  const std::vector<double> ref = reference_mtp(head, tf, h, tok, &g_ref);

  double worst = 0;
  for (int i = 0; i < n - 1; ++i) {
    const auto g = dr.row_output(i);
    for (int j = 0; j < d; ++j) worst = std::max(worst, std::fabs(g[static_cast<size_t>(j)] - g_ref[static_cast<size_t>(i * d + j)]));
  }
  INFO("context rows' g: max |diff| " << worst);
  CHECK(worst <= 1e-4);
  for (size_t depth = 0; depth <= path.size(); ++depth) {
    const std::vector<float> got = dr.logits_after(ctx, std::span<const int32_t>(path).first(depth));
    REQUIRE(got.size() == nv);
    const size_t row = static_cast<size_t>(n - 2) + depth;
    double diff = 0;
    for (size_t v = 0; v < nv; ++v) diff = std::max(diff, std::fabs(got[v] - ref[row * nv + v]));
    INFO("logits after " << depth << " drafted tokens: max |diff| " << diff);
    CHECK(diff <= 1e-4);
  }
  // Temporary rows were dropped.
  CHECK(dr.n_observed() == n - 1);
}

// The bundled head's products run on panels (its F16 matrices packed at load) and its LM head is
// the target's packed one, shared; with SPECCHAT_CPU_PACK=0 both stay row-major in the mappings.
// The logits agree up to summation order either way.
TEST_CASE("mtp: the bundled head packs its matrices and shares the target's packed LM head", "[model][mtp]") {
  const std::string path = models_dir() + "/specchat-mtp.gguf";
  if (!std::filesystem::exists(path)) {
    WARN("SKIPPED: " << path << " is absent");
    return;
  }
  LlamaModel::Options o;
  o.n_ctx = 256;
  o.n_threads = 2;
  auto run = [&](bool pack, std::vector<float>& logits) {
    if (!pack) ::setenv("SPECCHAT_CPU_PACK", "0", 1);
    auto target = LlamaModel::load(target_model(), o);
    MtpModel::Options mo;
    mo.pool = target->cpu_pool();
    const auto m = MtpModel::load(path, *target, mo);
    ::unsetenv("SPECCHAT_CPU_PACK");
    CHECK(m->shares_target_head() == pack);
    if (pack) {
      CHECK(m->packed_bytes() > 1'000'000);  // eh_proj 640 -> 320 and one layer of d 320, F16
    } else {
      CHECK(m->packed_bytes() == 0);
    }
    const int d = m->config().d_model, n = 5;
    std::vector<float> h(static_cast<size_t>(n) * static_cast<size_t>(d)), g(h.size());
    std::mt19937 rng(5);
    std::normal_distribution<float> u(0.0f, 1.0f);
    for (float& x : h) x = u(rng);
    const std::vector<int32_t> next = {17, 900, 33, 4000, 5}, pos = {0, 1, 2, 3, 4};
    MtpState st;
    m->forward(next, h.data(), pos, 0, nullptr, st, g.data());
    logits.assign(static_cast<size_t>(n) * static_cast<size_t>(m->config().n_vocab), 0.0f);
    m->logits(g.data(), n, logits.data(), st);
  };
  test::check_packed_matches_row_major(run);
}
