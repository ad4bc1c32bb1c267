// Every drafter in every tree shape (TreeBuilder: chain, dynamic, optimal) through the Engine on
// the bundled target, the drafters made by make_drafter (engine/speculative/drafter_factory.h): greedy output equals plain decoding, and every combination drafts. The
// drafters: the bundled draft model, n-gram lookup, the bundled DFlash block drafter and the
// recipe's reference MTP head (random weights: it drafts, few drafts are accepted).
#include <catch2/catch.hpp>

#include <memory>

#include "engine/drafters/dflash_model.h"
#include "engine/drafters/mtp_model.h"
#include "engine/generator.h"
#include "engine/model_fixture.h"
#include "engine/runtime/engine.h"
#include "engine/speculative/drafter_factory.h"
#include "test_data_files.h"
#include "test_paths.h"

using namespace specchat;

TEST_CASE("every drafter drafts in every tree shape, greedy output equals plain decoding", "[model][engine][trees]") {
  ModelPair& mp = test::bundled_pair();
  Engine engine(*mp.target, mp.draft.get());
  DrafterModels models;
  models.target = mp.target.get();
  models.block = DFlashModel::load(test::models_dir() + "/specchat-dflash.gguf", *mp.target);
  models.mtp = MtpModel::load(test::require_test_data("drafters/mtp-ref.gguf"), *mp.target);
  for (DrafterKind k : {DrafterKind::block, DrafterKind::mtp}) {
    engine.set_drafter_factory(k, [&, k](int slot) { return make_drafter(k, slot, models); });
  }
  auto run = [&](const std::vector<int32_t>& prompt, const SpecConfig& spec) {
    GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = 40;
    r.spec = spec;
    const Engine::SeqId id = engine.submit(r);
    engine.run_until_finished(id);
    return engine.take(id);
  };
  // A story that repeats itself (so n-gram lookup finds matches) and a chat question.
  const std::vector<std::vector<int32_t>> prompts = {
      mp.encode_prompt("Tom had a red ball. Tom liked the red ball. One day Tom lost the red ball, and"),
      mp.encode_chat({{"user", "What do cats like to eat?"}})};
  for (DrafterKind who : {DrafterKind::model, DrafterKind::ngram, DrafterKind::block, DrafterKind::mtp}) {
    for (TreeMode mode : {TreeMode::chain, TreeMode::dynamic, TreeMode::optimal}) {
      SpecConfig s;
      s.drafter = who;
      s.draft_k = 6;
      s.tree.mode = mode;
      s.tree.node_budget = mode == TreeMode::chain ? 4 : 10;
      s.tree.depth = 4;
      s.tree.branch = 3;
      if (mode == TreeMode::optimal) {
        // A static shape: a rank-0 spine with rank-1 siblings (as SequoiaPlanner's shapes look).
        s.tree.shape_parent = {-1, -1, 0, 0, 2, 2, 4, 4, 6, 6};
        s.tree.shape_rank = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
      }
      int drafted = 0;
      for (const auto& prompt : prompts) {
        INFO("drafter " << drafter_kind_name(who) << " shape " << tree_mode_name(mode));
        SpecConfig plain;
        plain.draft_k = 0;
        const GenerationResult want = run(prompt, plain);
        const GenerationResult got = run(prompt, s);
        CHECK(got.tokens == want.tokens);
        CHECK(got.stats.n_accepted <= got.stats.n_drafted);
        drafted += got.stats.n_drafted;
      }
      INFO("drafter " << drafter_kind_name(who) << " shape " << tree_mode_name(mode));
      CHECK(drafted > 0);
    }
  }
}
