// RequestPlanner: the one request policy of every front end (engine/runtime/request_planner.h).
// Context fitting (fits, oldest exchanges dropped, a prompt that alone is too long), the compare
// definitions (speedup_decode, total_time_ratio), SpecSettings' defaults and conversion, and the
// calibration file reader (tree planning: test_plan_tree.cpp). [unit] cases use no models; the
// [model] cases run the bound forms on the bundled pair.
#include <catch2/catch.hpp>

#include <algorithm>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cli_runner.h"
#include "engine/model.h"
#include "engine/model_fixture.h"
#include "engine/runtime/request_planner.h"
#include "engine/runtime/spec_settings.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"
#include "engine/runtime/plan_fixture.h"

using namespace specchat;
using namespace specchat::test;
namespace fs = std::filesystem;

namespace {

ContextMessage msg(const std::string& role, int n_tokens) {
  return {{role, std::string(static_cast<size_t>(n_tokens), 'x')}, {}, 0, {}};
}

// A stand-in tokenizer: BOS plus one token per character of every message. Records what it
// was last asked to encode.
struct FakeEncoder {
  std::vector<ContextMessage> last;
  int calls = 0;
  ContextEncoder fn() {
    return [this](const std::vector<ContextMessage>& m) {
      last = m;
      ++calls;
      ChatContext c;
      c.prompt.push_back(1);
      for (const ContextMessage& x : m) c.prompt.insert(c.prompt.end(), x.message.content.size(), 7);
      return c;
    };
  }
};

std::vector<std::string> roles(const std::vector<ContextMessage>& m) {
  std::vector<std::string> r;
  for (const ContextMessage& x : m) r.push_back(x.message.role);
  return r;
}


}  // namespace

// ---- SpecSettings ---------------------------------------------------------------------------

TEST_CASE("spec settings: one set of defaults, mapped to the engine's SpecConfig", "[unit]") {
  const SpecSettings d;
  CHECK(d.drafter == DrafterChoice::model);
  CHECK(d.tree == TreeMode::chain);
  CHECK_FALSE(d.auto_tree);
  CHECK(d.draft_k == 4);
  CHECK(d.node_budget == 16);
  CHECK(d.depth == 5);
  CHECK(d.branch == 3);

  SpecConfig c = to_spec_config(d);
  CHECK(c.draft_k == 4);
  CHECK(c.drafter == DrafterKind::model);
  CHECK(c.effective_budget().mode == TreeMode::chain);
  CHECK(c.effective_budget().node_budget == 4);
  CHECK(c.effective_budget().depth == 4);

  SpecSettings s = d;
  s.drafter = DrafterChoice::none;
  CHECK(to_spec_config(s).draft_k == 0);
  s.drafter = DrafterChoice::ngram;
  s.tree = TreeMode::dynamic;
  s.node_budget = 9;
  s.depth = 3;
  s.branch = 2;
  c = to_spec_config(s);
  CHECK(c.drafter == DrafterKind::ngram);
  CHECK(c.tree.mode == TreeMode::dynamic);
  CHECK(c.tree.node_budget == 9);
  CHECK(c.tree.depth == 3);
  CHECK(c.tree.branch == 2);
  CHECK(c.tree.shape_parent.empty());

  s.tree = TreeMode::optimal;
  const TreeShape shape = sequoia_tree(kMeasured, 6, 3);
  c = to_spec_config(s, shape);
  CHECK(c.tree.shape_parent == shape.parent);
  CHECK(c.tree.shape_rank == shape.rank);

  DrafterChoice dc = DrafterChoice::model;
  CHECK(parse_drafter_choice("ngram", &dc));
  CHECK(dc == DrafterChoice::ngram);
  CHECK_FALSE(parse_drafter_choice("bogus", &dc));
  TreeMode m = TreeMode::chain;
  CHECK(parse_tree_mode("optimal", &m));
  CHECK(m == TreeMode::optimal);
  CHECK_FALSE(parse_tree_mode("auto", &m));
}

TEST_CASE("spec settings: the block and MTP drafters by name", "[unit]") {
  for (const auto& [name, choice, kind] : {std::tuple{"block", DrafterChoice::block, DrafterKind::block},
                                           std::tuple{"mtp", DrafterChoice::mtp, DrafterKind::mtp}}) {
    INFO(name);
    DrafterChoice dc = DrafterChoice::model;
    CHECK(parse_drafter_choice(name, &dc));
    CHECK(dc == choice);
    CHECK(std::string(drafter_choice_name(choice)) == name);
    CHECK(std::string(drafter_kind_name(kind)) == name);
    SpecSettings s;
    s.drafter = choice;
    CHECK(to_spec_config(s).drafter == kind);
    CHECK(to_spec_config(s).draft_k == 4);
  }
}

// ---- fit_context ----------------------------------------------------------------------------

TEST_CASE("fit_context: a conversation that fits is encoded whole", "[unit]") {
  FakeEncoder enc;
  const ContextFit f =
      RequestPlanner::fit_context({msg("system", 10), msg("user", 10)}, /*max_tokens=*/20, /*n_ctx=*/100, enc.fn());
  CHECK(f.fits);
  CHECK(f.problem.empty());
  CHECK(f.n_dropped == 0);
  CHECK(f.reserve == 20);
  CHECK(f.prompt.size() == 21u);
  CHECK(enc.calls == 1);
}

TEST_CASE("fit_context: the reserve is min(max_tokens, n_ctx / 2), at least 1", "[unit]") {
  FakeEncoder enc;
  CHECK(RequestPlanner::fit_context({msg("user", 1)}, 1000, 128, enc.fn()).reserve == 64);
  CHECK(RequestPlanner::fit_context({msg("user", 1)}, 10, 128, enc.fn()).reserve == 10);
  CHECK(RequestPlanner::fit_context({msg("user", 1)}, 0, 128, enc.fn()).reserve == 1);
  CHECK(RequestPlanner::fit_context({msg("user", 1)}, 5, 1, enc.fn()).reserve == 1);
}

TEST_CASE("fit_context: the oldest exchanges are dropped, never the system prompt or the last turn", "[unit]") {
  FakeEncoder enc;
  // 1 + 10 + 4 * 30 + 10 = 141 tokens; n_ctx 128 with a reserve of 64 leaves 64 for the prompt.
  const std::vector<ContextMessage> conv = {msg("system", 10), msg("user", 30),      msg("assistant", 30),
                                            msg("user", 30),   msg("assistant", 30), msg("user", 10)};
  const ContextFit f = RequestPlanner::fit_context(conv, 64, 128, enc.fn());
  CHECK(f.fits);
  CHECK(f.n_dropped == 4);
  CHECK(f.prompt.size() == 21u);
  CHECK(roles(enc.last) == std::vector<std::string>{"system", "user"});
  CHECK(enc.last.back().message.content.size() == 10u);

  // Dropping stops as soon as the reply has room: one exchange is enough here.
  const ContextFit g = RequestPlanner::fit_context(conv, 40, 128, enc.fn());
  CHECK(g.n_dropped == 2);
  CHECK(g.prompt.size() == 81u);
  CHECK(roles(enc.last) == std::vector<std::string>{"system", "user", "assistant", "user"});

  // Several replies after one turn go with it (regenerated replies, a continuation).
  const ContextFit h = RequestPlanner::fit_context(
      {msg("user", 40), msg("assistant", 40), msg("assistant", 40), msg("user", 10)}, 64, 128, enc.fn());
  CHECK(h.n_dropped == 3);
  CHECK(roles(enc.last) == std::vector<std::string>{"user"});
}

TEST_CASE("fit_context: a prompt that alone fills the context does not fit", "[unit]") {
  FakeEncoder enc;
  const ContextFit f = RequestPlanner::fit_context({msg("system", 10), msg("user", 30), msg("assistant", 30),
                                                    msg("user", 200)},
                                                   64, 128, enc.fn());
  CHECK_FALSE(f.fits);
  CHECK(f.n_dropped == 2);  // everything droppable went first
  CHECK(f.prompt.size() == 211u);
  CHECK(contains(f.problem, "211 tokens"));
  CHECK(contains(f.problem, "128"));

  // Room for one token is enough to run (the reply may end context_full); none is not.
  CHECK(RequestPlanner::fit_context({msg("user", 126)}, 64, 128, enc.fn()).fits);
  CHECK_FALSE(RequestPlanner::fit_context({msg("user", 127)}, 64, 128, enc.fn()).fits);
}

// ---- compare --------------------------------------------------------------------------------

TEST_CASE("compare: speedup_decode is the decode tokens/s ratio, total_time_ratio beside it", "[unit]") {
  CompareRun base, spec;
  base.tokens = spec.tokens = {3, 4, 5, 6};
  base.stats.n_generated = spec.stats.n_generated = 4;
  base.stats.decode_ms = 400;  // 10 tok/s
  spec.stats.decode_ms = 100;  // 40 tok/s
  base.total_ms = 500;         // prefill 100 ms on both sides
  spec.total_ms = 200;
  CompareOutcome c = RequestPlanner::compare(base, spec);
  CHECK(c.identical);
  CHECK(c.first_diff == -1);
  CHECK(c.speedup_decode == Approx(4.0));
  CHECK(c.total_time_ratio == Approx(2.5));

  spec.tokens = {3, 4, 9, 6};
  c = RequestPlanner::compare(base, spec);
  CHECK_FALSE(c.identical);
  CHECK(c.first_diff == 2);
  spec.tokens = {3, 4, 5};
  CHECK(RequestPlanner::compare(base, spec).first_diff == 3);
  CHECK(RequestPlanner::first_difference(std::vector<int32_t>{}, std::vector<int32_t>{}) == -1);

  spec.stats = GenerationStats{};  // an empty side: no ratio
  spec.total_ms = 0;
  c = RequestPlanner::compare(base, spec);
  CHECK(c.speedup_decode == 0);
  CHECK(c.total_time_ratio == 0);
}

// ---- the calibration file -------------------------------------------------------------------

TEST_CASE("calibration store: status, acceptance and timings of a pair's file", "[unit]") {
  const fs::path dir = fs::temp_directory_path() / ("specchat-planner-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string target = (dir / "t.gguf").string(), draft = (dir / "d.gguf").string();
  std::ofstream(target) << "target bytes";
  std::ofstream(draft) << "draft bytes";
  const std::string path = calibration_path(draft);

  Calibration c = load_calibration(target, draft, TimingSetup{});
  CHECK(c.path == path);
  CHECK(c.status == Calibration::Status::missing);
  CHECK(contains(c.problem, "no calibration"));
  CHECK_FALSE(c.has_acceptance());

  std::ofstream(path) << "[1, 2";
  c = load_calibration(target, draft, TimingSetup{});
  CHECK(c.status == Calibration::Status::unreadable);

  nlohmann::json j{{"version", kCalibrationVersion},
                   {"target", calibration_file_info(target)},
                   {"draft", calibration_file_info(draft)},
                   {"acceptance", {{"accept_by_rank", kMeasured}}},
                   {"timings", calibration_timings_json(timings(0.2, 10, 0.1), TimingSetup{}, 64, 3)}};
  write_calibration_file(path, j);
  c = load_calibration(target, draft, TimingSetup{});
  CHECK(c.status == Calibration::Status::ok);
  CHECK(c.problem.empty());
  CHECK(c.accept_by_rank == kMeasured);
  CHECK(c.timings.valid());
  {  // Timings are per thread count, matched on the count a pool runs: 0 and anything above
     // the cores name the cores' setup; 1 differs from it wherever there are two cores or more.
    const int cores = effective_threads(0);
    CHECK(effective_threads(cores + 3) == cores);
    CHECK(effective_threads(-1) == cores);
    CHECK(load_calibration(target, draft, TimingSetup{cores}).timings.valid());
    CHECK(load_calibration(target, draft, TimingSetup{cores + 3}).timings.valid());
    if (cores > 1) {
      CHECK(effective_threads(1) == 1);
      CHECK_FALSE(load_calibration(target, draft, TimingSetup{1}).timings.valid());
    } else {
      WARN("one core: no second thread count to tell apart from the cores' setup");
    }
  }
  // ... and per KV type and activation rounding: a plan never uses timings measured another way.
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{0, "f32", "f32"}).timings.valid());
  CHECK_FALSE(load_calibration(target, draft, TimingSetup{0, "f16", "q8"}).timings.valid());
  {  // A table written before the keys were recorded matches any value of them.
    nlohmann::json legacy = j;
    legacy["timings"].erase("kv_type");
    legacy["timings"].erase("activations");
    write_calibration_file(path, legacy);
    CHECK(load_calibration(target, draft, TimingSetup{0, "f32", "q8"}).timings.valid());
    write_calibration_file(path, j);
  }

  j["acceptance"]["accept_by_rank"] = {0.5, 1.5};  // not probabilities
  write_calibration_file(path, j);
  c = load_calibration(target, draft, TimingSetup{});
  CHECK(c.status == Calibration::Status::ok);
  CHECK_FALSE(c.has_acceptance());
  CHECK(contains(c.problem, "no usable acceptance vector"));

  std::ofstream(draft) << "another draft";
  c = load_calibration(target, draft, TimingSetup{});
  CHECK(c.status == Calibration::Status::other_files);
  CHECK(contains(c.problem, "other model files"));
  CHECK_FALSE(c.timings_cached);
  fs::remove_all(dir);
}

// ---- the bound forms on the bundled pair ----------------------------------------------------

TEST_CASE("request planner on the bundled pair: context fitting and the calibrated optimal tree", "[model]") {
  ModelPair& pair = test::bundled_pair();
  const RequestPlanner planner(pair);
  const int n_ctx = pair.target->n_ctx();
  std::vector<ContextMessage> conv = {{{"system", "You are brief."}, {}, 0, {}}};
  const std::string turn = "Tell me about the harbour, the boats and the fishermen who sell fish at the market.";
  // About 40 tokens per exchange: n_ctx / 16 exchanges overflow any context (256 or 1,024).
  for (int i = 0; i < n_ctx / 16; ++i) {
    conv.push_back({{"user", turn}, {}, 0, {}});
    conv.push_back({{"assistant", turn}, {}, 0, {}});
  }
  conv.push_back({{"user", "And then?"}, {}, 0, {}});
  const ContextFit f = planner.fit_context(conv, 48);
  CHECK(f.fits);
  CHECK(f.n_dropped > 0);
  CHECK(f.n_dropped % 2 == 0);  // whole exchanges
  CHECK(static_cast<int>(f.prompt.size()) + f.reserve <= n_ctx);
  std::vector<ContextMessage> kept = {conv.front()};
  kept.insert(kept.end(), conv.begin() + 1 + f.n_dropped, conv.end());
  CHECK(f.prompt == build_chat_context(pair, kept).prompt);

  SpecSettings s;
  s.tree = TreeMode::optimal;
  s.node_budget = 8;
  s.depth = 4;
  const TreePlan p = planner.plan_tree(s);
  CHECK(p.warnings.empty());
  CHECK(p.acceptance_source == "calibration");  // resources/models/specchat-draft.calibration.json
  CHECK(p.spec.tree.mode == TreeMode::optimal);
  CHECK_FALSE(p.spec.tree.shape_parent.empty());
  CHECK(static_cast<int>(p.spec.tree.shape_parent.size()) <= 8);
}

// The CLI's flags take SpecSettings' defaults (the app's settings are checked in
// tests/ui/test_gui_settings.cpp): a dynamic tree with nothing else given runs N 16, D 5, K 3;
// compare reports RequestPlanner::compare's two numbers under their names.
TEST_CASE("request planner: the CLI runs SpecSettings' defaults and reports both compare numbers", "[model][cli]") {
  const SpecSettings d;
  auto r = test::run_cli({"generate", "--json", "--tree", "dynamic", "-n", "4", "--prompt", "Once upon a time"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  CHECK(r.json.at("draft_k") == d.draft_k);
  CHECK(r.json.at("node_budget") == d.node_budget);
  CHECK(r.json.at("depth") == d.depth);
  CHECK(r.json.at("branch") == d.branch);

  r = test::run_cli({"compare", "--json", "-n", "8", "--prompt", "Once upon a time"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  CHECK_FALSE(r.json.contains("speedup"));
  const double base_tps = r.json.at("baseline").at("tokens_per_s"), spec_tps = r.json.at("speculative").at("tokens_per_s");
  CHECK(r.json.at("speedup_decode").get<double>() == Approx(spec_tps / base_tps));
  const double base_ms = r.json.at("baseline").at("total_ms"), spec_ms = r.json.at("speculative").at("total_ms");
  CHECK(r.json.at("total_time_ratio").get<double>() == Approx(base_ms / spec_ms));
  CHECK(base_ms >= r.json.at("baseline").at("decode_ms").get<double>());
}

TEST_CASE("request planner: auto trees are planned without a prompt (the app's settings)", "[model]") {
  // Regression: the app plans a request's tree from its settings alone (ui/spec_setup.cpp); with
  // no timings in the calibration or the cache, `auto` timed the models on the prompt, found it
  // empty and threw ("could not time the models"), so every reply failed in Auto mode.
  ModelPair& pair = test::bundled_pair();
  const RequestPlanner planner(pair, 2);
  SpecSettings s;
  s.auto_tree = true;
  const Calibration cal = load_calibration(pair.target->path(), pair.draft->path(), timing_setup_of(*pair.target, 2));
  REQUIRE(cal.has_acceptance());
  if (cal.timings.valid()) {
    WARN("SKIPPED: timings for this setup are already cached (" << timing_cache_path(pair.target->path(), pair.draft->path())
                                                                 << "), so nothing would be measured");
    return;
  }
  TreePlan p;
  REQUIRE_NOTHROW(p = planner.plan_tree(s));
  CHECK(p.timings_source == "measured");
  CHECK(p.acceptance_model == "rank paths");  // the committed calibration records them
  CHECK(p.choice.step_ms > 0);
  CHECK(p.baseline_ms_per_token > 0);
  // Measured once, then cached for the next request (unless other programs disturbed the
  // timing, which the plan says: the next request then times the models again).
  const bool disturbed = std::any_of(p.warnings.begin(), p.warnings.end(),
                                     [](const std::string& w) { return w.find("disturbed") != std::string::npos; });
  CHECK(planner.plan_tree(s).timings_source == (disturbed ? "measured" : "cache"));
}
