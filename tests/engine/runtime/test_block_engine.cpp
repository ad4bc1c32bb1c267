// The bundled DFlash block drafter (resources/models/specchat-dflash.gguf) drafting for the
// bundled target through the Engine (engine/speculative/block_drafter.h): greedy output equals
// plain decoding on held-out prompts for chains and trees from block marginals, the drafter
// really drafts (accepted tokens > 0), and sampled output follows the target's distribution
// (chi-square on the first two tokens, issue 13's check "with the block drafter").
#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/drafters/dflash_model.h"
#include "engine/generator.h"
#include "engine/model_fixture.h"
#include "engine/runtime/engine.h"
#include "engine/sampling_fit.h"
#include "engine/speculative/block_drafter.h"
#include "test_paths.h"

using namespace specchat;

namespace {

std::shared_ptr<const DFlashModel> bundled_dflash(const LlamaModel& target) {
  static std::shared_ptr<const DFlashModel> m =
      DFlashModel::load(test::models_dir() + "/specchat-dflash.gguf", target);
  return m;
}

// Runs one request on the bundled target with the bundled block drafter installed. A fresh
// Generator per run: the engine's cache is not shared with other generators on the same model.
struct BlockGen {
  explicit BlockGen(ModelPair& mp) : mp(mp), model(bundled_dflash(*mp.target)) {}
  GenerationResult run(const std::vector<int32_t>& prompt, int n, TreeMode mode, int budget, SamplingParams s = {}) {
    Generator g(*mp.target, nullptr);
    auto m = model;
    g.engine().set_drafter_factory(DrafterKind::block,
                                   [m](int) -> std::unique_ptr<Drafter> { return std::make_unique<BlockDrafter>(m); });
    GenerateRequest r;
    r.prompt = prompt;
    r.max_tokens = n;
    r.sampling = s;
    r.spec.drafter = DrafterKind::block;
    r.spec.draft_k = mode == TreeMode::chain ? budget : 7;
    r.spec.tree.mode = mode;
    r.spec.tree.node_budget = budget;
    r.spec.tree.depth = 7;
    r.spec.tree.branch = 2;
    return g.generate(r);
  }
  ModelPair& mp;
  std::shared_ptr<const DFlashModel> model;
};

std::vector<std::vector<int32_t>> heldout(ModelPair& mp, size_t n) {
  std::ifstream in(test::test_data("heldout_prompts.json"));
  const auto j = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> out;
  const auto& ps = j.at("prompts");
  // Alternate story openings (first half of the file) and chat questions (second half).
  for (size_t i = 0; out.size() < n && i < ps.size() / 2; ++i) {
    for (const auto& p : {ps[i], ps[ps.size() / 2 + i]}) {
      const std::string s = p.at("text").get<std::string>();
      out.push_back(p.at("kind") == "chat" ? mp.encode_chat({{"user", s}}) : mp.encode_prompt(s));
    }
  }
  out.resize(std::min(out.size(), n));
  return out;
}

}  // namespace

TEST_CASE("bundled block drafter: greedy chains and trees equal plain decoding on held-out prompts",
          "[model][engine][block]") {
  ModelPair& mp = test::bundled_pair();
  BlockGen bg(mp);
  int accepted = 0, steps = 0, generated = 0;
  for (const auto& prompt : heldout(mp, 8)) {
    GenerateRequest base;
    base.prompt = prompt;
    base.max_tokens = 48;
    base.spec.draft_k = 0;
    const GenerationResult want = Generator(*mp.target, nullptr).generate(base);
    for (const auto& [mode, budget] : {std::pair{TreeMode::chain, 7}, std::pair{TreeMode::dynamic, 16}}) {
      INFO("mode " << tree_mode_name(mode) << " budget " << budget);
      const GenerationResult got = bg.run(prompt, 48, mode, budget);
      CHECK(got.tokens == want.tokens);
      accepted += got.stats.n_accepted;
      steps += got.stats.n_steps;
      generated += got.stats.n_generated;
    }
  }
  // A trained drafter is accepted: more than one token per target forward on average.
  INFO("accepted " << accepted << " steps " << steps << " generated " << generated);
  CHECK(accepted > 0);
  CHECK(static_cast<double>(generated) / steps > 1.5);
}

// T = 0.8, top-p 0.9 with the block drafter (chain of 7, and a tree of 12 from the block's
// marginals): the first two sampled tokens follow the target's processed distribution
// (chi-square, significance 0.001, fixed seeds).
TEST_CASE("bundled block drafter: sampled chains and trees follow the target distribution", "[model][engine][block]") {
  ModelPair& mp = test::bundled_pair();
  const auto prompt = mp.encode_prompt("Once upon a time");
  SamplingParams s;
  s.temperature = 0.8f;
  s.top_p = 0.9f;
  BlockGen bg(mp);
  for (const auto& [mode, budget] : {std::pair{TreeMode::chain, 7}, std::pair{TreeMode::dynamic, 12}}) {
    INFO("mode " << tree_mode_name(mode));
    int drafted = 0;
    const auto fit = test::fit_first_two_tokens(mp, prompt, s, 1200, [&](uint64_t seed) {
      SamplingParams si = s;
      si.seed = seed;
      const GenerationResult r = bg.run(prompt, 2, mode, budget, si);
      drafted += r.stats.n_drafted;
      return r.tokens;
    });
    INFO("first: chi2 " << fit.first.statistic << " dof " << fit.first.dof << " p " << fit.first.p_value);
    INFO("second after " << fit.top << ": n " << fit.n_second << " p " << fit.second.p_value);
    CHECK(drafted > 0);
    CHECK(fit.first.p_value > 0.001);
    CHECK(fit.second.p_value > 0.001);
  }
}
