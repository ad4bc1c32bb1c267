// The MTP head (engine/speculative/mtp_drafter.h) served by the Engine: one MtpDrafter per KV
// slot through Engine::set_drafter_factory, fed with the target's hidden states by the engine's
// forwards. The head is the recipe's random-weight reference (tests/data/drafters/mtp-ref.gguf,
// bound to the bundled target), so few drafts are accepted; what is checked is that the engine
// and the drafter agree on the context rows (MtpDrafter::observe throws on any gap or changed
// token), that drafting happens, and that greedy output equals plain greedy decoding.
#include <catch2/catch.hpp>

#include <memory>

#include "engine/generator.h"
#include "engine/model.h"
#include "engine/model_pair.h"
#include "engine/runtime/engine.h"
#include "engine/speculative/mtp_drafter.h"
#include "test_data_files.h"
#include "test_paths.h"

using namespace specchat;

namespace {

struct MtpRig {
  MtpRig() {
    PairOptions o;
    o.target_path = test::target_model();
    o.n_seq = 2;
    pair = ModelPair::load(o);
    ref = LlamaModel::load(test::target_model());
    model = MtpModel::load(test::require_test_data("drafters/mtp-ref.gguf"), *pair.target);
    engine = std::make_unique<Engine>(*pair.target, nullptr);
    engine->set_drafter_factory(DrafterKind::mtp, [this](int slot) -> std::unique_ptr<Drafter> {
      auto d = std::make_unique<MtpDrafter>(model, *pair.target, slot);
      drafters.push_back(d.get());
      return d;
    });
  }
  GenerationResult baseline(GenerateRequest req) {
    req.spec.draft_k = 0;
    Generator g(*ref, nullptr);
    return g.generate(req);
  }
  GenerationResult run(const GenerateRequest& req) {
    const Engine::SeqId id = engine->submit(req);
    engine->run_until_finished(id);
    return engine->take(id);
  }
  GenerateRequest request(const std::string& prompt, TreeMode mode, int max_tokens) {
    GenerateRequest r;
    r.prompt = pair.encode_prompt(prompt);
    r.max_tokens = max_tokens;
    r.spec.draft_k = 4;
    r.spec.drafter = DrafterKind::mtp;
    r.spec.tree.mode = mode;
    r.spec.tree.node_budget = mode == TreeMode::chain ? 4 : 10;
    r.spec.tree.depth = 4;
    r.spec.tree.branch = 3;
    return r;
  }
  ModelPair pair;
  std::unique_ptr<LlamaModel> ref;
  std::shared_ptr<const MtpModel> model;
  std::unique_ptr<Engine> engine;
  std::vector<MtpDrafter*> drafters;
};

}  // namespace

TEST_CASE("mtp in the engine: chains and dynamic trees, two turns, greedy output unchanged", "[model][engine][mtp]") {
  MtpRig rig;
  REQUIRE(rig.engine->has_drafter(DrafterKind::mtp));
  for (TreeMode mode : {TreeMode::chain, TreeMode::dynamic}) {
    INFO("mode " << tree_mode_name(mode));
    GenerateRequest t1 = rig.request("Once upon a time, there was a little fox who", mode, 40);
    const GenerationResult r1 = rig.run(t1);
    CHECK(r1.tokens == rig.baseline(t1).tokens);
    CHECK(r1.stats.n_drafted > 0);
    // Second turn: the prompt extends the first turn's context (rows of the shared prefix kept).
    GenerateRequest t2 = t1;
    t2.prompt.insert(t2.prompt.end(), r1.tokens.begin(), r1.tokens.end());
    const auto more = rig.pair.encode_prompt(" Then the fox");
    t2.prompt.insert(t2.prompt.end(), more.begin() + 1, more.end());  // without a second BOS
    t2.max_tokens = 24;
    const GenerationResult r2 = rig.run(t2);
    CHECK(r2.tokens == rig.baseline(t2).tokens);
    CHECK(r2.stats.n_drafted > 0);
  }
  REQUIRE(!rig.drafters.empty());
  for (const MtpDrafter* d : rig.drafters) CHECK(d->target_taps() == std::vector<int32_t>{rig.pair.target->config().n_layer - 1});
}

TEST_CASE("mtp in the engine: sampled chains are reproducible for a seed", "[model][engine][mtp]") {
  MtpRig rig;
  GenerateRequest r = rig.request("Lily and her mom went to the store.", TreeMode::chain, 32);
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 40;
  r.sampling.seed = 1234;
  const GenerationResult a = rig.run(r), b = rig.run(r);
  CHECK(a.tokens == b.tokens);
  CHECK(a.stats.n_drafted > 0);
}
