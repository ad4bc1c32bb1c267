// Speculative decoding on the bundled pair: greedy identity with baseline, the sampled
// distribution, determinism, and the stop/length rules (FAULT-KINDS B01, B02, B04, B07, B09,
// B10, B12, B13).
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/model.h"
#include "model_fixture.h"
#include "sampling_fit.h"

using namespace specchat;

namespace {

std::vector<std::vector<int32_t>> heldout_prompts(ModelPair& mp, size_t n) {
  std::ifstream in(test::test_data("heldout_prompts.json"));
  const auto j = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : j.at("prompts")) {
    const std::string text = p.at("text").get<std::string>();
    out.push_back(p.at("kind") == "chat" ? mp.encode_chat({{"user", text}}) : mp.encode_prompt(text));
  }
  // Interleave story and chat prompts so any n covers both kinds.
  std::vector<std::vector<int32_t>> mixed;
  const size_t half = out.size() / 2;
  for (size_t i = 0; i < half && mixed.size() < n; ++i) {
    mixed.push_back(out[i]);
    if (mixed.size() < n) mixed.push_back(out[half + i]);
  }
  return mixed;
}

GenerationResult run(ModelPair& mp, const std::vector<int32_t>& prompt, int n, int k,
                     SamplingParams s = {}, std::vector<std::string> stop = {}) {
  Generator g(*mp.target, mp.draft.get());
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling = s;
  r.spec.draft_k = k;
  r.stop_strings = std::move(stop);
  return g.generate(r);
}

}  // namespace

// Greedy speculative output equals baseline on the first n held-out prompts.
static void check_greedy_identity_heldout(size_t n) {
  ModelPair& mp = test::bundled_pair();
  const auto prompts = heldout_prompts(mp, n);
  REQUIRE(prompts.size() == n);
  int total_drafted = 0, total_accepted = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto base = run(mp, prompts[i], 64, 0);
    for (int k : {1, 3, 6}) {
      const auto spec = run(mp, prompts[i], 64, k);
      INFO("prompt " << i << " k " << k);
      REQUIRE(spec.tokens == base.tokens);
      CHECK(spec.finish == base.finish);
      // Invariants of the stats (B22): emitted = accepted + steps unless cut by N or EOS.
      CHECK(spec.stats.n_accepted <= spec.stats.n_drafted);
      CHECK(spec.stats.n_generated <= spec.stats.n_accepted + spec.stats.n_steps);
      total_drafted += spec.stats.n_drafted;
      total_accepted += spec.stats.n_accepted;
    }
  }
  CHECK(total_drafted > 0);
  CHECK(total_accepted > 0);
}

TEST_CASE("greedy speculative output equals baseline on held-out prompts", "[model][speculative]") {
  check_greedy_identity_heldout(8);
}

TEST_CASE("greedy speculative output equals baseline on 50 held-out prompts (full sweep)",
          "[model][speculative][.slow]") {
  check_greedy_identity_heldout(50);
}

TEST_CASE("a perfect draft (the target itself) is always accepted", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  // Load a second copy of the target as its own draft: α must be 1 and τ = k + 1.
  auto self = LlamaModel::load(test::target_model());
  Generator gs(*mp.target, self.get());
  GenerateRequest r;
  r.prompt = mp.encode_prompt("Once upon a time");
  r.max_tokens = 40;
  r.spec.draft_k = 4;
  mp.target->kv().truncate(0);
  const auto res = gs.generate(r);
  const auto base = run(mp, r.prompt, 40, 0);
  CHECK(res.tokens == base.tokens);
  if (res.finish == FinishReason::length) {
    CHECK(res.stats.acceptance_rate() == Approx(1.0));
    CHECK(res.stats.mean_accepted_length() == Approx(5.0));
  }
}

TEST_CASE("exactly N tokens for every N, equal to the baseline's first N", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_prompt("Once upon a time");
  const auto base = run(mp, prompt, 64, 0);
  for (int n : {0, 1, 2, 3, 7, 8, 9, 16, 17, 33}) {
    for (int k : {1, 4, 8}) {
      const auto r = run(mp, prompt, n, k);
      INFO("n " << n << " k " << k);
      const size_t want = std::min<size_t>(static_cast<size_t>(n), base.tokens.size());
      REQUIRE(r.tokens.size() == want);
      CHECK(r.stats.n_generated == static_cast<int>(want));
      CHECK(std::equal(r.tokens.begin(), r.tokens.end(), base.tokens.begin()));
      // Nothing past the last emitted token stays in the target's cache (B07).
      CHECK(mp.target->kv().size() <= static_cast<int>(prompt.size() + r.tokens.size()));
    }
  }
}

TEST_CASE("a stop string ends generation at the same place for every k", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_prompt("Once upon a time");
  const auto base = run(mp, prompt, 48, 0);
  REQUIRE(base.tokens.size() >= 12);
  // Use the text of tokens 8..9 as the stop string: generation must end before token 8.
  const std::string stop = mp.target->vocab().decode({base.tokens[8], base.tokens[9]});
  const auto base_stop = run(mp, prompt, 48, 0, {}, {stop});
  CHECK(base_stop.finish == FinishReason::stop);
  CHECK(base_stop.text.find(stop) == std::string::npos);
  for (int k : {1, 2, 3, 5, 8}) {
    const auto r = run(mp, prompt, 48, k, {}, {stop});
    INFO("k " << k);
    CHECK(r.finish == FinishReason::stop);
    CHECK(r.tokens == base_stop.tokens);
    CHECK(r.text == base_stop.text);
  }
}

TEST_CASE("the same seed gives the same sampled output - another seed differs", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_prompt("Once upon a time");
  SamplingParams s;
  s.temperature = 1.5f;
  s.seed = 42;
  const auto a = run(mp, prompt, 48, 4, s);
  const auto b = run(mp, prompt, 48, 4, s);
  CHECK(a.tokens == b.tokens);
  s.seed = 1;
  const auto c = run(mp, prompt, 48, 4, s);
  s.seed = 2;
  const auto d = run(mp, prompt, 48, 4, s);
  CHECK(c.tokens != d.tokens);
}

// The first two sampled tokens at T = 1 follow the target's own distribution (B02). Position 1
// is drafted inside a block, so it exercises accepted drafts and residual resampling. Expected
// probabilities come from the target's processed logits; chi-square at significance 0.001.
TEST_CASE("sampled speculative tokens follow the target distribution", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_prompt("Once upon a time");
  SamplingParams s;
  s.temperature = 1.0f;
  s.top_k = 40;
  const auto fit = test::fit_first_two_tokens(mp, prompt, s, 1500, [&](uint64_t seed) {
    SamplingParams si = s;
    si.seed = seed;
    return run(mp, prompt, 2, 4, si).tokens;
  });
  INFO("first: chi2 " << fit.first.statistic << " dof " << fit.first.dof << " p " << fit.first.p_value);
  INFO("second after " << fit.top << ": n " << fit.n_second << " p " << fit.second.p_value);
  CHECK(fit.first.p_value > 0.001);
  CHECK(fit.second.p_value > 0.001);
}

TEST_CASE("prompts that do not fit, and empty prompts, give typed errors", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  Generator g(*mp.target, mp.draft.get());
  GenerateRequest r;
  r.prompt.assign(static_cast<size_t>(mp.target->n_ctx()) + 1, 100);
  r.spec.draft_k = 4;
  try {
    g.generate(r);
    FAIL("no error");
  } catch (const GenerationError& e) {
    CHECK(e.kind() == "prompt_too_long");
    CHECK(std::string(e.what()).find("context is") != std::string::npos);
  }
  r.prompt.clear();
  CHECK_THROWS_AS(g.generate(r), GenerationError);
  // Boundaries: a prompt of exactly n_ctx tokens gives one token; n_ctx - k gives k + 1 at most.
  for (int back : {0, 1, 4}) {
    r.prompt.assign(static_cast<size_t>(mp.target->n_ctx() - back), 100);
    r.prompt[0] = mp.target->vocab().bos_id;
    r.max_tokens = 16;
    const auto res = g.generate(r);
    INFO("n_ctx - " << back);
    CHECK(res.tokens.size() <= static_cast<size_t>(back + 1));
    CHECK((res.finish == FinishReason::context_full || res.finish == FinishReason::eos));
  }
  // The engine stays usable afterwards.
  r.prompt = mp.encode_prompt("Hello");
  r.max_tokens = 4;
  CHECK_NOTHROW(g.generate(r));
}

// Regression (τ of plain decoding was 0.998): the step that produces the EOS / end-of-turn
// token that ends a reply counts for τ like any produced token, though the token is not emitted.
TEST_CASE("tau of plain decoding is exactly 1 when the reply ends on end-of-turn", "[model][speculative]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_chat({{"user", "Tom has 3 apples and buys 5 more. How many apples does he have?"}});
  const GenerationResult r = run(mp, prompt, 400, 0);
  INFO("finish " << finish_reason_name(r.finish) << " after " << r.tokens.size() << " tokens");
  REQUIRE(r.finish == FinishReason::eos);  // the bundled target ends this answer within 400 tokens
  CHECK(r.stats.n_steps == r.stats.n_generated + 1);
  CHECK(r.stats.n_target_tokens == r.stats.n_steps);
  CHECK(r.stats.mean_accepted_length() == 1.0);
  // And a speculative run of the same reply: τ counts the final token too.
  const GenerationResult s = run(mp, prompt, 400, 4);
  REQUIRE(s.tokens == r.tokens);
  CHECK(s.stats.n_target_tokens == s.stats.n_generated + 1);
}
