// PIPO decoding (docs/design/pipo.md): the io ends against an f64 reference, threshold 1 as the
// backbone's own one-token decoding, pair alignment (odd prompts, PAD only in second slots),
// prefix reuse in whole pairs only, continuation equal to the uninterrupted run, and the MTP
// head's lazily caught-up context.
#include <catch2/catch.hpp>

#include <cmath>

#include "engine/pipo/pipo_release.h"
#include "engine/pipo/pipo_fixture.h"

using namespace specchat;
using namespace specchat::test;

namespace {

struct Loaded {
  PipoFixture f;
  PipoUnit u;
  Loaded() {
    f.write();
    PipoLoadOptions o;
    o.backbone.n_ctx = 64;
    o.backbone.n_seq = 2;
    o.backbone.max_batch = 32;
    o.backbone.n_threads = 1;
    u = load_pipo_release(f.dir.path.string(), o);
  }
};

const std::vector<int32_t> kPrompt = {1, 3, 523, 1207, 88, 4000, 17, 6, 4, 250, 251};  // 11 raw ids

std::vector<int32_t> align(std::vector<int32_t> ids) {
  if (ids.size() % 2) ids.push_back(kPipoPad);
  return ids;
}

// Backbone-only reference: every pair's latent recomputed and the whole sequence run from an
// empty cache in sequence 1; returns the last row's argmax.
int32_t reference_next(PipoUnit& u, const std::vector<int32_t>& pairs) {
  LlamaModel& bb = *u.backbone;
  const int d = bb.config().d_model;
  const int m = static_cast<int>(pairs.size() / 2);
  bb.kv(1).truncate(0);
  Batch b;
  b.seq = 1;
  PipoIoScratch s;
  b.embd.resize(static_cast<size_t>(m) * d);
  for (int j = 0; j < m; ++j) {
    u.io->compress(pairs[2 * j], pairs[2 * j + 1], b.embd.data() + static_cast<size_t>(j) * d, s);
    b.tokens.push_back(pairs[2 * j]);
    b.pos.push_back(j);
    b.parent.push_back(j - 1);
  }
  b.out_rows.push_back(m - 1);
  const auto logits = bb.forward(b);
  bb.kv(1).truncate(0);
  return argmax(logits);
}

}  // namespace

TEST_CASE("pipo: the compressor and confidence head match an f64 reference", "[unit][pipo]") {
  Loaded L;
  const GgufFile io = GgufFile::open(L.f.path("io"));
  const GgufFile bb = GgufFile::open(L.f.path("backbone"));
  PipoIoScratch s;
  std::vector<float> lat(64);
  for (auto [a, b] : std::vector<std::pair<int32_t, int32_t>>{{5, 9}, {4095, 0}, {17, kPipoPad}}) {
    L.u.io->compress(a, b, lat.data(), s);
    const auto ref = reference_latent(io, bb, a, b);
    for (size_t i = 0; i < lat.size(); ++i) CHECK(lat[i] == Approx(ref[i]).margin(1e-4));
  }
  std::vector<float> h(64), g(64);
  for (int i = 0; i < 64; ++i) {
    h[static_cast<size_t>(i)] = std::sin(0.3f * static_cast<float>(i)) * 2.0f;
    g[static_cast<size_t>(i)] = std::cos(0.7f * static_cast<float>(i));
  }
  CHECK(L.u.io->confidence(h.data(), g.data(), s) == Approx(reference_confidence(io, h.data(), g.data(), 64)).margin(1e-5));
  CHECK_THROWS_AS(L.u.io->compress(kPipoPad, 5, lat.data(), s), std::invalid_argument);
  CHECK_THROWS_AS(L.u.io->compress(5, 4096, lat.data(), s), std::invalid_argument);
}

TEST_CASE("pipo: threshold 1 is the backbone's own one-token decoding over (t, PAD) pairs", "[unit][pipo]") {
  Loaded L;
  PipoSession s(L.u);
  std::vector<int32_t> pairs = align(kPrompt);
  REQUIRE(pairs.back() == kPipoPad);  // an odd prompt gets one PAD
  s.sync(pairs);
  Rng rng(1);
  for (int k = 0; k < 10; ++k) {
    const int32_t want = reference_next(L.u, pairs);
    const PipoStep st = s.step(SamplingParams{}, rng, 1.0f, {});
    CHECK_FALSE(st.head_ran);
    CHECK(st.t2 == kPipoPad);
    CHECK(st.t1 == want);
    pairs.push_back(st.t1);
    pairs.push_back(kPipoPad);
    REQUIRE(std::vector<int32_t>(s.pairs().begin(), s.pairs().end()) == pairs);
  }
}

TEST_CASE("pipo: threshold 0 keeps every second token, each pair then run as a latent", "[unit][pipo]") {
  Loaded L;
  PipoSession s(L.u);
  std::vector<int32_t> pairs = align(kPrompt);
  s.sync(pairs);
  Rng rng(1);
  for (int k = 0; k < 6; ++k) {
    const PipoStep st = s.step(SamplingParams{}, rng, 0.0f, {});
    REQUIRE(st.head_ran);
    CHECK(st.t2 == st.proposed);
    CHECK(st.confidence >= 0.0f);
    CHECK(st.confidence <= 1.0f);
    pairs.push_back(st.t1);
    pairs.push_back(st.t2);
    // The next step's t1 is what the backbone predicts from the whole pair sequence.
    CHECK(argmax(s.last_logits()) == reference_next(L.u, pairs));
  }
}

TEST_CASE("pipo: pair sequences keep PAD in second slots only", "[unit][pipo]") {
  Loaded L;
  PipoSession s(L.u);
  CHECK_THROWS_AS(s.sync(std::vector<int32_t>{1, 5, 7}), std::invalid_argument);           // odd length
  CHECK_THROWS_AS(s.sync(std::vector<int32_t>{1, 5, kPipoPad, 7}), std::invalid_argument); // PAD first
  CHECK_THROWS_AS(s.sync(std::vector<int32_t>{1, 4096}), std::invalid_argument);           // not an id
  CHECK_THROWS_AS(s.sync(std::vector<int32_t>{}), std::invalid_argument);
  CHECK_THROWS_AS(s.step(SamplingParams{}, *std::make_unique<Rng>(1), 0.5f, {}), std::logic_error);
  CHECK(raw_length(align(kPrompt)) == static_cast<int>(kPrompt.size()));
}

TEST_CASE("pipo: a cached prefix is reused in whole pairs only", "[unit][pipo]") {
  Loaded L;
  PipoSession s(L.u);
  const std::vector<int32_t> a = {1, 3, 523, 1207, 88, 4000, 17, 6};  // 4 pairs
  CHECK(s.sync(a) == 0);
  std::vector<int32_t> b = a;
  b.insert(b.end(), {4, 250, 251, kPipoPad});
  CHECK(s.sync(b) == 4);  // a's pairs, all of them
  // Same raw prefix up to the middle of pair 2 (88 kept, 4000 changed): only pairs 0..1 reused.
  std::vector<int32_t> c = {1, 3, 523, 1207, 88, 12, 17, 6};
  CHECK(s.sync(c) == 2);
  // Same raw ids but regrouped: (88, PAD) then (4000, 17) is not the pair (88, 4000).
  std::vector<int32_t> d = {1, 3, 523, 1207, 88, kPipoPad, 4000, 17, 6, kPipoPad};
  CHECK(s.sync(d) == 2);
  // Whatever was reused, the logits are those of a fresh session.
  PipoSession fresh(L.u, 1);
  fresh.sync(d);
  const auto x = s.last_logits(), y = fresh.last_logits();
  REQUIRE(x.size() == y.size());
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(x[i] == y[i]);
  // The same sequence again re-feeds only its last pair.
  CHECK(s.sync(d) == 4);
}

TEST_CASE("pipo: a continued conversation equals the uninterrupted run (greedy)", "[unit][pipo]") {
  Loaded L;
  PipoGenerateOptions o;
  o.max_tokens = 9;
  o.settings.acceptance_threshold = 0.5f;
  // Turn 1, then turn 2 continuing the stored pair sequence in the same session.
  PipoSession s(L.u);
  const std::vector<int32_t> p1 = align(kPrompt);
  const PipoReply r1 = pipo_generate(s, p1, o);
  REQUIRE(r1.counters.steps > 0);
  CHECK(static_cast<long>(r1.raw.size()) == r1.counters.raw_tokens);
  CHECK(raw_length(r1.new_pairs) == static_cast<int>(r1.raw.size()));
  std::vector<int32_t> history = p1;
  history.insert(history.end(), r1.new_pairs.begin(), r1.new_pairs.end());
  std::vector<int32_t> turn2 = history;
  const std::vector<int32_t> user2 = align({6, 3, 77, 91, 6, 4, 9});
  turn2.insert(turn2.end(), user2.begin(), user2.end());
  const PipoReply r2 = pipo_generate(s, turn2, o);
  CHECK(r2.reused_pairs == static_cast<int>(history.size() / 2));
  // A fresh session (a reload: nothing cached) given the stored pair sequence.
  PipoSession reload(L.u, 1);
  const PipoReply r2b = pipo_generate(reload, turn2, o);
  CHECK(r2b.reused_pairs == 0);
  CHECK(r2b.new_pairs == r2.new_pairs);
  CHECK(r2b.raw == r2.raw);
}

TEST_CASE("pipo: the MTP head's context catches up after steps that did not run it", "[unit][pipo]") {
  Loaded L;
  PipoSession a(L.u);
  const std::vector<int32_t> p = align(kPrompt);
  a.sync(p);
  Rng rng(3);
  for (int k = 0; k < 4; ++k) a.step(SamplingParams{}, rng, 1.0f, {});  // head never ran
  const std::vector<int32_t> now(a.pairs().begin(), a.pairs().end());
  PipoSession b(L.u, 1);
  b.sync(now);
  for (int k = 0; k < 4; ++k) {
    const PipoStep x = a.step(SamplingParams{}, rng, 0.0f, {});
    const PipoStep y = b.step(SamplingParams{}, rng, 0.0f, {});
    CHECK(x.t1 == y.t1);
    CHECK(x.proposed == y.proposed);
    CHECK(x.confidence == y.confidence);
  }
}

TEST_CASE("pipo: sampling at T > 0 reproduces from its seed, and stops end the reply", "[unit][pipo]") {
  Loaded L;
  PipoGenerateOptions o;
  o.max_tokens = 12;
  o.sampling.temperature = 0.9f;
  o.sampling.seed = 42;
  o.settings.acceptance_threshold = 0.3f;
  PipoSession s(L.u);
  const PipoReply r1 = pipo_generate(s, align(kPrompt), o);
  const PipoReply r2 = pipo_generate(s, align(kPrompt), o);
  CHECK(r1.raw == r2.raw);
  CHECK(r1.new_pairs == r2.new_pairs);
  // Every id may end the turn: the first step stops with one token and a PAD.
  std::vector<int32_t> all(4096);
  for (int32_t i = 0; i < 4096; ++i) all[static_cast<size_t>(i)] = i;
  o.stop_ids = all;
  const PipoReply r3 = pipo_generate(s, align(kPrompt), o);
  CHECK(r3.stop_reason == "stop");
  CHECK(r3.raw.size() == 1);
  CHECK(r3.new_pairs.size() == 2);
  CHECK(r3.new_pairs[1] == kPipoPad);
}

TEST_CASE("pipo: settings outside the mode are refused, and limits stop the reply", "[unit][pipo]") {
  Loaded L;
  PipoSession s(L.u);
  PipoGenerateOptions o;
  o.settings.pair_size = 3;
  CHECK_THROWS_AS(pipo_generate(s, align(kPrompt), o), PipoError);
  o.settings.pair_size = 2;
  o.settings.acceptance_threshold = 1.5f;
  CHECK_THROWS_AS(pipo_generate(s, align(kPrompt), o), PipoError);
  o.settings.acceptance_threshold = 0.0f;
  // An odd max_tokens with every token 2 kept: the last step emits one token, its pair ends in
  // PAD (the stored pairs are exactly what was emitted; a found bug emitted max_tokens + 1).
  o.max_tokens = 7;
  const PipoReply odd = pipo_generate(s, align(kPrompt), o);
  REQUIRE(odd.stop_reason == "length");
  CHECK(odd.raw.size() == 7);
  CHECK(raw_length(odd.new_pairs) == 7);
  CHECK(odd.new_pairs.back() == kPipoPad);
  o.settings.raw_context = 20;  // 11 prompt tokens: room for a few steps of up to 2 tokens
  o.max_tokens = 100;
  const PipoReply r = pipo_generate(s, align(kPrompt), o);
  CHECK(r.stop_reason == "context");
  CHECK(raw_length(s.pairs()) <= 20);
  CHECK(o.settings.latent_context(64) == 20);
  // Regression: a raw context above what the backbone's pairs can hold (2 × its n_ctx) was
  // reported as given; the limit in force is capped there.
  o.settings.raw_context = 500;
  CHECK(o.settings.raw_limit(64) == 128);
  CHECK(o.settings.latent_context(64) == 64);
  o.settings.raw_context = 0;
  CHECK(o.settings.raw_limit(64) == 128);
  o.settings.raw_context = 8;  // the prompt alone does not fit
  CHECK_THROWS_AS(pipo_generate(s, align(kPrompt), o), std::length_error);
}

TEST_CASE("pipo: KL of logits, and the fidelity gauge samples one step in N", "[unit][pipo]") {
  const std::vector<float> a = {1.0f, 2.0f, 3.0f}, b = {3.0f, 2.0f, 1.0f};
  CHECK(kl_of_logits(a, a) == Approx(0.0).margin(1e-12));
  // softmax(a) = (0.0900, 0.2447, 0.6652); KL(a ‖ b) = Σ p (log p − log q) = 2 · (0.6652 − 0.0900).
  CHECK(kl_of_logits(a, b) == Approx(2.0 * (0.665241 - 0.090031)).epsilon(1e-4));
  CHECK_THROWS_AS(kl_of_logits(a, std::vector<float>{1.0f}), std::invalid_argument);
  Loaded L;
  // The plain target here: a tiny llama of the same vocabulary (any model with the vocabulary will do).
  TempDir d("pipo-plain");
  TinySpec ts;
  ts.seed = 99;
  ts.n_ctx = 128;
  tiny_model(ts).write_file(d.file("plain.gguf"));
  auto plain = LlamaModel::load(d.file("plain.gguf"));
  PipoFidelity f;
  f.plain = plain.get();
  f.every = 3;
  PipoGenerateOptions o;
  o.max_tokens = 10;
  o.settings.acceptance_threshold = 1.0f;  // one token per step: 10 steps
  o.fidelity = &f;
  PipoSession s(L.u);
  const PipoReply r = pipo_generate(s, align(kPrompt), o);
  REQUIRE(r.counters.steps == 10);
  CHECK(f.samples == 4);  // steps 0, 3, 6, 9
  CHECK(f.mean_kl() > 0.0);
  CHECK(std::isfinite(f.kl_max));
  CHECK(f.kl_max >= f.mean_kl());
  CHECK(r.monitor_s > 0.0);
}
