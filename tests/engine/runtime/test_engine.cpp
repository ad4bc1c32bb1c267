// Engine: several sequences decoded together in one batched target forward give, per sequence,
// exactly the tokens of decoding it alone (greedy and sampled; chain, dynamic tree and n-gram
// drafters mixed in one batch; sequences joining and leaving mid-run; cancellation).
#include <catch2/catch.hpp>

#include <atomic>
#include <map>

#include "engine/model.h"
#include "engine/op_profile.h"
#include "engine/runtime/engine.h"
#include "engine/model_fixture.h"

using namespace specchat;

namespace {

// The bundled pair with a KV pool of 4 sequences, loaded once.
ModelPair& pool_pair() {
  static ModelPair pair = [] {
    PairOptions o;
    o.target_path = test::target_model();
    o.draft_path = test::draft_model();
    o.n_seq = 4;
    return ModelPair::load(o);
  }();
  return pair;
}

struct Case {
  std::string prompt;
  int max_tokens;
  SpecConfig spec;
  SamplingParams sampling;
};

SpecConfig chain(int k) {
  SpecConfig s;
  s.draft_k = k;
  return s;
}
SpecConfig baseline() { return chain(0); }
SpecConfig dynamic_tree() {
  SpecConfig s;
  s.draft_k = 4;
  s.tree.mode = TreeMode::dynamic;
  s.tree.node_budget = 12;
  s.tree.depth = 4;
  s.tree.branch = 3;
  return s;
}
SpecConfig ngram() {
  SpecConfig s;
  s.draft_k = 4;
  s.drafter = DrafterKind::ngram;
  return s;
}

GenerateRequest request(ModelPair& mp, const Case& c) {
  GenerateRequest r;
  r.prompt = mp.encode_prompt(c.prompt);
  r.max_tokens = c.max_tokens;
  r.spec = c.spec;
  r.sampling = c.sampling;
  return r;
}

// Each case decoded alone, on the single-sequence bundled pair, with a cold cache.
GenerationResult alone(const Case& c) {
  ModelPair& mp = test::bundled_pair();
  Generator g(*mp.target, mp.draft.get());
  g.clear_cache();
  return g.generate(request(mp, c));
}

void check_same(const GenerationResult& got, const GenerationResult& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.tokens == want.tokens);
  CHECK(got.drafted == want.drafted);  // same drafts accepted: the drafter ran as it does alone
  CHECK(got.finish == want.finish);
  CHECK(got.text == want.text);
  CHECK(got.stats.n_steps == want.stats.n_steps);
  CHECK(got.stats.n_drafted == want.stats.n_drafted);
}

const std::vector<std::string> kPrompts = {
    "Once upon a time, there was a little girl named Lily.",
    "Tom had a red ball. He liked to play with it in the park every day. One day",
    "The cat sat",
    "Sue and her mom went to the store to buy some apples and bananas for the",
};

}  // namespace

TEST_CASE("engine: 4 greedy baseline sequences together equal each alone", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  REQUIRE(e.capacity() == 4);
  std::vector<Case> cases;
  for (size_t i = 0; i < kPrompts.size(); ++i) cases.push_back({kPrompts[i], 24 + 8 * static_cast<int>(i), baseline(), {}});
  std::vector<Engine::SeqId> ids;
  for (const Case& c : cases) ids.push_back(e.submit(request(mp, c)));
  CHECK(e.n_active() == 4);
  while (e.step() > 0) {
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    check_same(e.take(ids[i]), alone(cases[i]), "sequence " + std::to_string(i));
  }
}

TEST_CASE("engine: chain, dynamic tree, n-gram and baseline mixed in one batch equal each alone",
          "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  const std::vector<Case> cases = {
      {kPrompts[0], 40, chain(3), {}},
      {kPrompts[1], 40, dynamic_tree(), {}},
      {kPrompts[2] + " the cat sat on the mat. The cat sat", 40, ngram(), {}},
      {kPrompts[3], 40, baseline(), {}},
  };
  std::vector<Engine::SeqId> ids;
  for (const Case& c : cases) ids.push_back(e.submit(request(mp, c)));
  while (e.step() > 0) {
  }
  int drafted = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const GenerationResult r = e.take(ids[i]);
    drafted += r.stats.n_drafted;
    check_same(r, alone(cases[i]), "sequence " + std::to_string(i));
  }
  CHECK(drafted > 0);
}

TEST_CASE("engine: a draft cap changed between steps keeps every sequence's greedy tokens", "[model][engine]") {
  // The server shortens drafts as its batch grows (set_draft_cap between steps): the tokens must
  // stay those of decoding alone; only the number of drafted tokens and steps may change.
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  CHECK(e.draft_cap() == -1);
  CHECK_THROWS_AS(e.set_draft_cap(-2), std::invalid_argument);
  const std::vector<Case> cases = {
      {kPrompts[0], 40, chain(4), {}},
      {kPrompts[1], 40, dynamic_tree(), {}},
      {kPrompts[2] + " the cat sat on the mat. The cat sat", 40, ngram(), {}},
  };
  std::vector<Engine::SeqId> ids;
  for (const Case& c : cases) ids.push_back(e.submit(request(mp, c)));
  const int caps[] = {0, 0, 2, -1, 1, 0, 3};
  int step = 0;
  while (e.n_active() > 0) {
    e.set_draft_cap(caps[step++ % 7]);
    e.step();
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    const GenerationResult got = e.take(ids[i]);
    const GenerationResult want = alone(cases[i]);
    INFO("sequence " << i);
    CHECK(got.tokens == want.tokens);
    CHECK(got.text == want.text);
    CHECK(got.finish == want.finish);
    CHECK(got.stats.n_drafted < want.stats.n_drafted);  // the cap really shortened drafts
  }
}

TEST_CASE("engine: draft cap 0 decodes like baseline with nothing drafted", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  e.set_draft_cap(0);
  const Case spec{kPrompts[0], 32, chain(4), {}};
  const Engine::SeqId id = e.submit(request(mp, spec));
  while (e.step() > 0) {
  }
  const GenerationResult got = e.take(id);
  const GenerationResult base = alone({kPrompts[0], 32, baseline(), {}});
  CHECK(got.tokens == base.tokens);
  CHECK(got.stats.n_drafted == 0);
  CHECK(got.stats.n_empty_drafts == 0);  // not a drafter failure: drafting was switched off
  CHECK(got.stats.n_steps == base.stats.n_steps);

  // Submitted while drafting is off (no draft prefill), drafting resumed mid-reply: the
  // drafter catches up by itself and the tokens stay the same.
  e.set_draft_cap(0);
  const Case resumed{kPrompts[1], 32, chain(4), {}};
  const Engine::SeqId id2 = e.submit(request(mp, resumed));
  for (int i = 0; i < 5; ++i) e.step();
  e.set_draft_cap(-1);
  while (e.step() > 0) {
  }
  const GenerationResult got2 = e.take(id2);
  CHECK(got2.tokens == alone(resumed).tokens);
  CHECK(got2.stats.n_drafted > 0);
}

TEST_CASE("engine: sequences joining and leaving mid-run equal each alone", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  const Case a{kPrompts[0], 48, chain(4), {}};
  const Case b{kPrompts[1], 6, baseline(), {}};  // leaves early
  const Case c{kPrompts[2], 30, dynamic_tree(), {}};
  const Case d{kPrompts[3], 30, chain(2), {}};
  const Case f{kPrompts[1], 20, ngram(), {}};  // takes b's slot after it left
  const auto ia = e.submit(request(mp, a));
  const auto ib = e.submit(request(mp, b));
  for (int i = 0; i < 3; ++i) e.step();
  const auto ic = e.submit(request(mp, c));
  e.step();
  const auto id = e.submit(request(mp, d));
  while (!e.finished(ib)) e.step();
  const GenerationResult rb = e.take(ib);
  REQUIRE(e.n_active() == 3);
  const auto iff = e.submit(request(mp, f));
  CHECK(e.n_active() == 4);
  while (e.step() > 0) {
  }
  check_same(e.take(ia), alone(a), "a");
  check_same(rb, alone(b), "b");
  check_same(e.take(ic), alone(c), "c");
  check_same(e.take(id), alone(d), "d");
  check_same(e.take(iff), alone(f), "f");
}

TEST_CASE("engine: sampled sequences (T > 0) together equal each alone with the same seed", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  std::vector<Case> cases;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    SamplingParams s;
    s.temperature = 0.9f;
    s.top_p = 0.95f;
    s.seed = 1000 + i;
    cases.push_back({kPrompts[i], 32, i % 2 ? chain(3) : dynamic_tree(), s});
  }
  std::vector<Engine::SeqId> ids;
  for (const Case& c : cases) ids.push_back(e.submit(request(mp, c)));
  while (e.step() > 0) {
  }
  for (size_t i = 0; i < cases.size(); ++i) check_same(e.take(ids[i]), alone(cases[i]), "sequence " + std::to_string(i));
}

TEST_CASE("engine: cancelling one sequence leaves the others' tokens unchanged", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  std::vector<Case> cases;
  for (size_t i = 0; i < kPrompts.size(); ++i) cases.push_back({kPrompts[i], 40, chain(3), {}});
  std::atomic<bool> stop{false};
  std::vector<Engine::SeqId> ids;
  for (size_t i = 0; i < cases.size(); ++i) ids.push_back(e.submit(request(mp, cases[i]), {}, i == 1 ? &stop : nullptr));
  for (int i = 0; i < 3; ++i) e.step();
  stop = true;
  while (e.step() > 0) {
  }
  const GenerationResult cancelled = e.take(ids[1]);
  CHECK(cancelled.finish == FinishReason::cancelled);
  const GenerationResult full = alone(cases[1]);
  REQUIRE(cancelled.tokens.size() < full.tokens.size());
  CHECK(std::equal(cancelled.tokens.begin(), cancelled.tokens.end(), full.tokens.begin()));
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}}) check_same(e.take(ids[i]), alone(cases[i]), "sequence " + std::to_string(i));
}

TEST_CASE("engine: a full pool refuses with engine_full and a bad request keeps nothing", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  std::vector<Engine::SeqId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(e.submit(request(mp, {kPrompts[0], 4, baseline(), {}})));
  try {
    e.submit(request(mp, {kPrompts[1], 4, baseline(), {}}));
    FAIL("a fifth sequence was accepted");
  } catch (const GenerationError& err) {
    CHECK(err.kind() == "engine_full");
  }
  GenerateRequest empty;
  CHECK_THROWS_AS(e.submit(empty), GenerationError);
  CHECK(e.n_active() == 4);
  CHECK_THROWS_AS(e.take(ids[0]), std::invalid_argument);  // not finished yet
  while (e.step() > 0) {
  }
  for (auto id : ids) CHECK(e.take(id).tokens.size() == 4);
  CHECK_THROWS_AS(e.take(ids[0]), std::invalid_argument);  // taken once
}

TEST_CASE("engine: a new request reuses the slot whose cache shares its prefix", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  const auto first = e.submit(request(mp, {kPrompts[1], 8, chain(2), {}}));
  const auto other = e.submit(request(mp, {kPrompts[0], 8, chain(2), {}}));
  while (e.step() > 0) {
  }
  const GenerationResult r1 = e.take(first);
  e.take(other);
  // The next turn: prompt + reply + more text. Its prefix is in the first request's slot.
  GenerateRequest next = request(mp, {kPrompts[1], 8, chain(2), {}});
  next.prompt.insert(next.prompt.end(), r1.tokens.begin(), r1.tokens.end());
  next.prompt.push_back(next.prompt[3]);
  const auto id = e.submit(next);
  e.run_until_finished(id);
  CHECK(e.take(id).stats.n_prompt_cached >= static_cast<int>(next.prompt.size()) - 2);
}

// Batched drafting: the draft model's rounds of every sequence share one draft forward. Three
// chains of 3 (rounds: the root, then 2 nodes) and a dynamic tree of depth 4 (the root, then 3
// levels) take 4 draft forwards in one step, not 3 + 3 + 3 + 4 = 13; tokens and drafts stay
// those of each sequence alone (the other engine tests check that).
TEST_CASE("engine: the draft model drafts every sequence's round in one forward", "[model][engine]") {
  ModelPair& mp = pool_pair();
  Engine e(*mp.target, mp.draft.get());
  e.clear_cache();
  std::vector<Engine::SeqId> ids;
  for (size_t i = 0; i < 3; ++i) ids.push_back(e.submit(request(mp, {kPrompts[i], 16, chain(3), {}})));
  ids.push_back(e.submit(request(mp, {kPrompts[3], 16, dynamic_tree(), {}})));
  OpProfile prof;
  REQUIRE(mp.draft->set_profile(&prof));
  e.step();
  mp.draft->set_profile(nullptr);
  CHECK(prof.forwards == 4);
  while (e.step() > 0) {
  }
  for (Engine::SeqId id : ids) CHECK(e.take(id).stats.n_drafted > 0);
}
