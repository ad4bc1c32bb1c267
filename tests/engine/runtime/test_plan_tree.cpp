// RequestPlanner::plan_tree (engine/runtime/request_planner.h), the pure form: clamping, THE
// calibration fallback, n-gram trees, auto budgets from timings, the block and MTP drafters, and
// trees planned from a calibration's rank paths. No models.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "engine/runtime/plan_fixture.h"

using namespace specchat;
using namespace specchat::test;

TEST_CASE("plan_tree: plain decoding, no draft model, clamped budgets", "[unit]") {
  SpecSettings s;
  s.draft_k = 0;
  TreePlan p = RequestPlanner::plan_tree(s, with_draft());
  CHECK_FALSE(p.speculative());
  CHECK(p.settings.drafter == DrafterChoice::none);
  CHECK(p.warnings.empty());

  s = SpecSettings{};
  s.drafter = DrafterChoice::none;
  CHECK(RequestPlanner::plan_tree(s, with_draft()).spec.draft_k == 0);

  s = SpecSettings{};
  PlanContext no_draft = with_draft();
  no_draft.has_draft_model = false;
  p = RequestPlanner::plan_tree(s, no_draft);
  CHECK_FALSE(p.speculative());
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "no draft model"));
  // The n-gram drafter needs no draft model.
  s.drafter = DrafterChoice::ngram;
  CHECK(RequestPlanner::plan_tree(s, no_draft).spec.draft_k == 4);

  s = SpecSettings{};
  s.tree = TreeMode::dynamic;
  s.draft_k = 200;
  s.node_budget = 500;
  s.depth = 600;
  s.branch = 0;
  p = RequestPlanner::plan_tree(s, with_draft(31));
  CHECK(p.warnings.empty());  // chains and dynamic trees never consult the calibration
  CHECK(p.settings.draft_k == 31);
  CHECK(p.spec.tree.node_budget == 31);
  CHECK(p.spec.tree.depth == 31);
  CHECK(p.spec.tree.branch == 1);
  s.node_budget = 6;
  s.depth = 9;
  p = RequestPlanner::plan_tree(s, with_draft());
  CHECK(p.spec.tree.depth == 6);
  CHECK(p.acceptance_source.empty());
}

TEST_CASE("plan_tree: optimal trees from the calibration, else THE fallback (the prior)", "[unit]") {
  SpecSettings s;
  s.tree = TreeMode::optimal;
  s.node_budget = 8;
  s.depth = 3;
  PlanContext ctx = with_draft();
  ctx.calibration.status = Calibration::Status::ok;
  ctx.calibration.problem.clear();
  ctx.calibration.accept_by_rank = kMeasured;
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.warnings.empty());
  CHECK(p.acceptance_source == "calibration");
  CHECK(p.calibration_found);
  const TreeShape want = sequoia_tree(kMeasured, 8, 3);
  CHECK(p.spec.tree.mode == TreeMode::optimal);
  CHECK(p.spec.tree.shape_parent == want.parent);
  CHECK(p.spec.tree.shape_rank == want.rank);
  CHECK(p.expected_tokens() == Approx(want.expected_tokens));

  const std::vector<double> prior = RequestPlanner::prior_accept_by_rank();
  REQUIRE(prior.size() == 8u);
  CHECK(prior[0] == 0.5);
  CHECK(prior[7] == Approx(std::pow(0.5, 8)));
  struct Case {
    Calibration::Status status;
    std::string problem;
  };
  for (const Case& c : {Case{Calibration::Status::missing, "no calibration at X (run `specchat-cli calibrate`)"},
                        Case{Calibration::Status::other_files, "calibration X was made for other model files"},
                        Case{Calibration::Status::unreadable, "calibration X is not a JSON object"},
                        Case{Calibration::Status::ok, "calibration X has no usable acceptance vector"}}) {
    INFO(c.problem);
    PlanContext f = with_draft();
    f.calibration.status = c.status;
    f.calibration.problem = c.problem;
    p = RequestPlanner::plan_tree(s, f);
    CHECK(p.acceptance_source == "fallback");
    CHECK(p.accept_by_rank == prior);
    CHECK(p.spec.tree.mode == TreeMode::optimal);  // the requested shape family is kept
    CHECK(p.spec.tree.shape_parent == sequoia_tree(prior, 8, 3).parent);
    REQUIRE(p.warnings.size() == 1);
    CHECK(contains(p.warnings[0], c.problem));
    CHECK(contains(p.warnings[0], "prior"));
  }
}

// Every drafter drafts every shape (TreeBuilder): an optimal tree for the n-gram drafter is a
// Sequoia shape from the prior acceptance (its acceptance by rank is not calibrated); an auto
// tree, which needs measured acceptance and timings, falls back to a dynamic tree.
TEST_CASE("plan_tree: the n-gram drafter's optimal tree has the prior's shape, its auto tree is dynamic", "[unit]") {
  const std::vector<double> prior = RequestPlanner::prior_accept_by_rank();
  for (bool automatic : {false, true}) {
    INFO("auto " << automatic);
    SpecSettings s;
    s.drafter = DrafterChoice::ngram;
    s.tree = TreeMode::optimal;
    s.auto_tree = automatic;
    s.node_budget = 12;
    s.depth = 4;
    const TreePlan p = RequestPlanner::plan_tree(s, with_draft());
    CHECK(p.spec.drafter == DrafterKind::ngram);
    CHECK(p.spec.tree.node_budget == 12);
    REQUIRE(p.warnings.size() == 1);
    CHECK(contains(p.warnings[0], "n-gram"));
    if (automatic) {
      CHECK(p.spec.tree.mode == TreeMode::dynamic);
      CHECK(p.acceptance_source.empty());
    } else {
      CHECK(p.spec.tree.mode == TreeMode::optimal);
      CHECK(p.spec.tree.shape_parent == sequoia_tree(prior, 12, 4).parent);
      CHECK(p.acceptance_source == "prior");
      CHECK(contains(p.warnings[0], "prior"));
    }
  }
}

TEST_CASE("plan_tree: auto budgets from the calibration's timings, else measured once", "[unit]") {
  SpecSettings s;
  s.auto_tree = true;
  PlanContext ctx = with_draft();
  ctx.calibration.status = Calibration::Status::ok;
  ctx.calibration.problem.clear();
  ctx.calibration.accept_by_rank = kMeasured;
  ctx.calibration.timings = timings(0.2, 10.0, 0.05);  // verification nearly flat: trees pay
  int measured = 0;
  ctx.measure_timings = [&] {
    ++measured;
    return timings(0.2, 10.0, 0.05);
  };
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(measured == 0);
  CHECK(p.timings_source == "calibration");
  const SequoiaPlanner planner(kMeasured, 64, 64);
  const BudgetChoice want = choose_budget(planner, ctx.calibration.timings, 64, 64);
  REQUIRE(want.node_budget > 0);
  CHECK(p.speculative());
  CHECK(p.choice.node_budget == want.node_budget);
  CHECK(p.choice.depth == want.depth);
  CHECK(p.expected_tokens() == Approx(want.expected_tokens));
  CHECK(p.baseline_ms_per_token == Approx(10.0));
  CHECK(p.spec.effective_budget().node_budget == want.node_budget);
  CHECK_FALSE(p.settings.auto_tree);

  ctx.calibration.timings = StepTimings{};
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(measured == 1);
  CHECK(p.timings_source == "measured");

  // Drafting that costs more than it saves: plain decoding.
  ctx.calibration.timings = timings(50.0, 1.0, 1.0);
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK_FALSE(p.speculative());
  CHECK(p.choice.node_budget == 0);

  // No timings and no way to measure them: an error, not a silent guess.
  ctx.calibration.timings = StepTimings{};
  ctx.measure_timings = [] { return StepTimings{}; };
  CHECK_THROWS_AS(RequestPlanner::plan_tree(s, ctx), std::runtime_error);
}

TEST_CASE("plan_tree: block and MTP drafters run only where installed, a block bounds the depth", "[unit]") {
  PlanContext ctx = with_draft();
  ctx.has_draft_model = false;
  SpecSettings s;
  s.drafter = DrafterChoice::block;
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK_FALSE(p.speculative());
  CHECK(p.settings.drafter == DrafterChoice::none);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "no block drafter"));
  s.drafter = DrafterChoice::mtp;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK_FALSE(p.speculative());
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "no MTP head"));

  ctx.block_size = 8;
  ctx.has_mtp = true;
  p = RequestPlanner::plan_tree(s, ctx);  // mtp chain, as asked
  CHECK(p.spec.drafter == DrafterKind::mtp);
  CHECK(p.spec.draft_k == 4);
  CHECK(p.warnings.empty());

  // Block chains draft at most B − 1 tokens.
  s.drafter = DrafterChoice::block;
  s.draft_k = 6;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.drafter == DrafterKind::block);
  CHECK(p.spec.draft_k == 6);
  CHECK(p.warnings.empty());
  s.draft_k = 12;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.draft_k == 7);
  CHECK(p.spec.effective_budget().depth == 7);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "at most 7"));

  // Block trees from the marginals: node budget and branch as asked, depth ≤ B − 1.
  s.tree = TreeMode::dynamic;
  s.node_budget = 20;
  s.depth = 9;
  s.branch = 2;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.tree.mode == TreeMode::dynamic);
  CHECK(p.spec.tree.node_budget == 20);
  CHECK(p.spec.tree.depth == 7);
  CHECK(p.spec.tree.branch == 2);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "7 deep"));

  // No rank calibration: optimal trees take the prior's Sequoia shape with the same budget;
  // auto trees without a calibration of the drafter are dynamic (test_feature_calibration.cpp
  // has those with one).
  for (DrafterChoice d : {DrafterChoice::block, DrafterChoice::mtp}) {
    for (bool automatic : {false, true}) {
      INFO(drafter_choice_name(d) << " auto " << automatic);
      s.drafter = d;
      s.tree = TreeMode::optimal;
      s.auto_tree = automatic;
      s.node_budget = 12;
      s.depth = 4;
      p = RequestPlanner::plan_tree(s, ctx);
      CHECK(p.spec.tree.mode == (automatic ? TreeMode::dynamic : TreeMode::optimal));
      CHECK(p.spec.tree.node_budget == 12);
      CHECK(p.spec.tree.depth == 4);
      CHECK(p.acceptance_source == (automatic ? "" : "prior"));
      if (!automatic) CHECK(p.spec.tree.shape_parent == sequoia_tree(RequestPlanner::prior_accept_by_rank(), 12, 4).parent);
      REQUIRE(p.warnings.size() == 1);
      CHECK(contains(p.warnings[0], automatic ? "no calibration for the" : "no rank calibration"));
    }
  }
}

TEST_CASE("plan_tree: a calibration's rank paths plan optimal and auto trees", "[unit]") {
  // Measured paths where the draft's second choice is right after every miss of its first: the
  // plan must come from them, not from the vector's independence model.
  std::vector<std::vector<int8_t>> paths;
  for (int i = 0; i < 30; ++i) paths.push_back({0, 0, 1, 0, 0, 5, 0, 1, 0, 0, 0, 5});
  const RankPathModel model(paths, 5, kRankPathMaxDepth);
  PlanContext ctx = with_calibration(paths);
  ctx.calibration.timings = timings(0.2, 10.0, 0.05);
  SpecSettings s = optimal_tree(6, 4);
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_source == "calibration");
  CHECK(p.acceptance_model == "rank paths");
  const TreeShape want = model.best_tree(6, 4);
  CHECK(p.spec.tree.shape_parent == want.parent);
  CHECK(p.spec.tree.shape_rank == want.rank);
  CHECK(p.expected_tokens() == Approx(want.expected_tokens));

  s.auto_tree = true;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_model == "rank paths");
  const SequoiaPlanner planner(kMeasured, 64, 64);
  const BudgetChoice c = choose_budget(planner, ctx.calibration.timings, 64, 64, &model);
  CHECK(p.choice.node_budget == c.node_budget);
  CHECK(p.choice.depth == c.depth);
  CHECK(p.expected_tokens() == Approx(c.expected_tokens));

  // Paths that do not fit the vector (a rank past its R) are not used: the vector's model plans.
  ctx.calibration.rank_paths = {{0, 9}};
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_model == "independent ranks");
  CHECK(p.choice.node_budget == choose_budget(planner, ctx.calibration.timings, 64, 64).node_budget);
  // No paths (a file written before they were recorded): the same.
  ctx.calibration.rank_paths.clear();
  s.auto_tree = false;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_model == "independent ranks");
  CHECK(p.spec.tree.shape_parent == sequoia_tree(kMeasured, 6, 4).parent);
}

TEST_CASE("plan_tree: sparse rank paths say how much of the budget they fill", "[unit]") {
  // Regression (break-it pass): a calibration whose paths could fill only part of the budget
  // drafted a smaller tree (or none) while the plan reported the budget asked for.
  std::vector<std::vector<int8_t>> paths(40, std::vector<int8_t>{0, 0, 5, 0, 5, 5, 5, 5});  // R = 5: 5 is a miss
  PlanContext ctx = with_calibration(paths);
  const SpecSettings s = optimal_tree(8, 4);
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  REQUIRE(p.acceptance_model == "rank paths");
  CHECK(p.shape.size() == 2);  // the paths (0) and (0, 0): nothing else was ever accepted
  CHECK(p.spec.effective_budget().node_budget == 2);
  CHECK(p.spec.effective_budget().depth == 2);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "fill 2 of the 8 nodes"));
  // Fewer than kMinRankPathStarts ranks: too little to plan from; the vector plans, in full,
  // and the plan says the paths were not used.
  ctx.calibration.rank_paths.assign(3, std::vector<int8_t>{0, 0, 1});
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_model == "independent ranks");
  CHECK(p.shape.size() == sequoia_tree(kMeasured, 8, 4).size());
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "rank paths are not used"));
  // A file whose rank paths were unreadable says so too.
  ctx.calibration.rank_paths.clear();
  ctx.calibration.rank_paths_recorded = true;
  p = RequestPlanner::plan_tree(s, ctx);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "rank paths are not used"));
  ctx.calibration.rank_paths_recorded = false;
  CHECK(RequestPlanner::plan_tree(s, ctx).warnings.empty());
}

TEST_CASE("plan_tree: optimal trees report the nodes and depth that run", "[unit]") {
  // Regression (break-it pass): the Sequoia tree of a calibration with one rank (a chain) was
  // planned for 16 nodes at depth 4 and reported 16 while 4 ran; a rank-paths tree of no node
  // was reported as one node and ran "speculative" with empty drafts.
  PlanContext ctx = with_calibration();
  ctx.calibration.accept_by_rank = {0.7};
  SpecSettings s = optimal_tree(16, 4);
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.shape.size() == 4);
  CHECK(p.spec.effective_budget().node_budget == 4);
  CHECK(p.spec.effective_budget().depth == 4);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "4 of the 16 nodes"));
  // Depth: the tree's own, not the cap asked for.
  ctx.calibration.accept_by_rank = kMeasured;
  s.node_budget = 3;
  s.depth = 10;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.effective_budget().depth == p.shape.max_depth());
  CHECK(p.shape.max_depth() < 10);
  // Every rank a miss in 300 recorded positions: no tree at all, so plain decoding.
  ctx.calibration.rank_paths.assign(1, std::vector<int8_t>(300, 5));  // R = 5
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.acceptance_model == "rank paths");
  CHECK_FALSE(p.speculative());
  CHECK(p.settings.drafter == DrafterChoice::none);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "plain decoding"));
}
