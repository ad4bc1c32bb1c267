// The draft back-off in the engine (SpecConfig::backoff, engine/speculative/draft_backoff.h): a
// draft that never matches the target is paused, a draft that always matches never is, and the
// output is the target's own either way (greedy and sampled with a seed).
#include <catch2/catch.hpp>

#include <vector>

#include "engine/generator.h"
#include "engine/model.h"

using namespace specchat;

namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.n_vocab = 97;
  c.d_model = 32;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.d_ff = 64;
  c.n_ctx_train = 256;
  return c;
}

GenerateRequest req(int draft_k, bool backoff, float temp) {
  GenerateRequest r;
  r.prompt = {1, 5, 9, 14, 3};
  r.max_tokens = 120;
  r.spec.draft_k = draft_k;
  r.spec.backoff = backoff;
  r.sampling.temperature = temp;
  r.sampling.seed = 11;
  return r;
}

}  // namespace

TEST_CASE("draft back-off: a draft that never matches is paused, and the output stays the target's",
          "[unit][engine][spec]") {
  LlamaModel::Options o;
  o.max_batch = 16;
  auto target = LlamaModel::random(tiny(), o, 1);
  auto stranger = LlamaModel::random(tiny(), o, 2);  // other weights: its drafts rarely match
  Generator g(*target, stranger.get());
  const GenerationResult base = g.generate(req(0, true, 0.0f));
  const GenerationResult raw = g.generate(req(4, false, 0.0f));
  const GenerationResult paused = g.generate(req(4, true, 0.0f));
  REQUIRE(base.tokens.size() == 120);
  CHECK(raw.tokens == base.tokens);
  CHECK(paused.tokens == base.tokens);
  CHECK(raw.stats.n_backoff_steps == 0);
  INFO("raw: drafted " << raw.stats.n_drafted << " accepted " << raw.stats.n_accepted << "; with back-off: drafted "
                       << paused.stats.n_drafted << " accepted " << paused.stats.n_accepted << ", paused steps "
                       << paused.stats.n_backoff_steps);
  // The stranger accepts little, so most steps are paused and far fewer tokens are drafted.
  CHECK(raw.stats.n_accepted * 4 < raw.stats.n_drafted);
  CHECK(paused.stats.n_backoff_steps > 40);
  CHECK(paused.stats.n_drafted * 3 < raw.stats.n_drafted);
  // Probes after a pause draft one token: at most 4 strikes of 4 before the first pause.
  CHECK(paused.stats.n_drafted <= 16 + (paused.stats.n_steps - paused.stats.n_backoff_steps));
  // Sampled: the same seed gives the same tokens run after run (the pauses depend only on the
  // tokens), and the target's distribution is kept (checked by the sampled identity tests).
  const GenerationResult s1 = g.generate(req(4, true, 0.9f));
  const GenerationResult s2 = g.generate(req(4, true, 0.9f));
  CHECK(s1.tokens == s2.tokens);
  CHECK(s1.stats.n_backoff_steps == s2.stats.n_backoff_steps);
}

TEST_CASE("draft back-off: a draft that always matches is never paused", "[unit][engine][spec]") {
  LlamaModel::Options o;
  o.max_batch = 16;
  auto target = LlamaModel::random(tiny(), o, 1);
  auto twin = LlamaModel::random(tiny(), o, 1);  // the same weights: greedy drafts always match
  Generator g(*target, twin.get());
  const GenerationResult r = g.generate(req(4, true, 0.0f));
  CHECK(r.stats.n_backoff_steps == 0);
  CHECK(r.stats.n_accepted == r.stats.n_drafted);
  CHECK(r.stats.n_accepted > 80);
}

TEST_CASE("draft back-off: the n-gram drafter is never paused (its drafts cost a lookup)", "[unit][engine][spec]") {
  LlamaModel::Options o;
  o.max_batch = 16;
  auto target = LlamaModel::random(tiny(), o, 1);
  Generator g(*target, nullptr);
  GenerateRequest r = req(4, true, 0.0f);
  r.spec.drafter = DrafterKind::ngram;
  const GenerationResult on = g.generate(r);
  r.spec.backoff = false;
  const GenerationResult off = g.generate(r);
  CHECK(on.tokens == off.tokens);
  CHECK(on.stats.n_backoff_steps == 0);
  CHECK(on.stats.n_drafted == off.stats.n_drafted);
}
