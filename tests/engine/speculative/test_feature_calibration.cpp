// Calibration of the block drafter and the MTP head (engine/speculative/feature_calibration.h)
// and `--tree auto` for them (RequestPlanner::plan_tree): the grid, the file's reading rules
// (missing, unreadable, other files, malformed entries), the choice of the fastest measured
// configuration (plain decoding when none beats it), and the CLI end to end: `calibrate
// --drafter block` writes the file beside the drafter, and `generate --tree auto` then runs its
// choice with the baseline's greedy output.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "engine/cli_runner.h"
#include "engine/drafters/dflash_model.h"
#include "engine/model_fixture.h"
#include "engine/runtime/request_planner.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"
#include "engine/speculative/feature_calibration.h"
#include "test_paths.h"

using namespace specchat;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const TimingSetup kSetup{2, "f16", "f32"};

FeatureConfigResult config(TreeMode mode, int k_or_n, int depth, double tau, double tps) {
  FeatureConfigResult r;
  r.settings.drafter = DrafterChoice::block;
  r.settings.tree = mode;
  r.settings.draft_k = mode == TreeMode::chain ? k_or_n : 7;
  r.settings.node_budget = k_or_n;
  r.settings.depth = depth;
  r.settings.branch = 2;
  r.tau = tau;
  r.tokens_per_s = tps;
  return r;
}

PlanContext block_ctx() {
  PlanContext c;
  c.block_size = 8;
  c.has_mtp = true;
  c.max_nodes = 127;
  c.feature_calibration.status = FeatureCalibration::Status::ok;
  c.feature_calibration.path = "/m/dflash.calibration.json";
  c.feature_calibration.baseline_tokens_per_s = 1000;
  return c;
}

// A scratch folder with copies of the bundled target and block drafter (a calibration is
// written beside the drafter; the repository's copy stays untouched).
struct ScratchModels {
  fs::path dir;
  ScratchModels() {
    dir = fs::temp_directory_path() / ("specchat-featcal-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::copy_file(test::target_model(), dir / "target.gguf", fs::copy_options::overwrite_existing);
    fs::copy_file(test::models_dir() + "/specchat-dflash.gguf", dir / "dflash.gguf",
                  fs::copy_options::overwrite_existing);
  }
  ~ScratchModels() { fs::remove_all(dir); }
  std::string target() const { return (dir / "target.gguf").string(); }
  std::string drafter() const { return (dir / "dflash.gguf").string(); }
};

}  // namespace

TEST_CASE("feature calibration grid: block chains up to B - 1 and trees, MTP chains 1-4", "[unit][calibration]") {
  const auto g = feature_calibration_grid(DrafterChoice::block, 8);
  int chains = 0, trees = 0;
  for (const SpecSettings& s : g) {
    CHECK(s.drafter == DrafterChoice::block);
    CHECK_FALSE(s.auto_tree);
    CHECK(s.depth <= 7);
    if (s.tree == TreeMode::chain) {
      ++chains;
      CHECK(s.draft_k == chains);
    } else {
      ++trees;
      CHECK(s.tree == TreeMode::dynamic);
    }
  }
  CHECK(chains == 7);
  CHECK(trees >= 5);
  const auto m = feature_calibration_grid(DrafterChoice::mtp, 0);
  CHECK(m.front().draft_k == 1);
  for (const SpecSettings& s : m) CHECK(s.depth <= 4);
  CHECK_THROWS_AS(feature_calibration_grid(DrafterChoice::model, 8), std::invalid_argument);
  CHECK_THROWS_AS(feature_calibration_grid(DrafterChoice::block, 1), std::invalid_argument);
}

TEST_CASE("plan_tree auto for the block drafter: the fastest measured configuration, else plain", "[unit][calibration]") {
  PlanContext ctx = block_ctx();
  ctx.feature_calibration.configs = {config(TreeMode::chain, 3, 3, 2.5, 1400), config(TreeMode::dynamic, 16, 7, 3.6, 1700),
                                     config(TreeMode::chain, 7, 7, 3.1, 1200)};
  SpecSettings s;
  s.drafter = DrafterChoice::block;
  s.auto_tree = true;
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.warnings.empty());
  CHECK(p.spec.drafter == DrafterKind::block);
  CHECK(p.spec.tree.mode == TreeMode::dynamic);
  CHECK(p.spec.tree.node_budget == 16);
  CHECK(p.spec.tree.depth == 7);
  CHECK(p.timings_source == "calibration");
  CHECK(p.calibration_found);
  CHECK(p.expected_tokens() == Approx(3.6));
  CHECK(p.choice.ms_per_token() == Approx(1000.0 / 1700));
  CHECK(p.baseline_ms_per_token == Approx(1.0));

  // A chain choice runs as a chain of that length.
  ctx.feature_calibration.configs[0].tokens_per_s = 2000;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.tree.mode == TreeMode::chain);
  CHECK(p.spec.draft_k == 3);

  // Nothing beats plain decoding: plain decoding, no warning (the calibration said so).
  for (auto& c : ctx.feature_calibration.configs) c.tokens_per_s = 900;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK_FALSE(p.speculative());
  CHECK(p.settings.drafter == DrafterChoice::none);
  CHECK(p.warnings.empty());

  // A calibration for other files: a dynamic tree and the fix in the warning.
  ctx.feature_calibration.status = FeatureCalibration::Status::other_files;
  ctx.feature_calibration.problem = "calibration /m/dflash.calibration.json was made for other model files "
                                    "(re-run `specchat-cli calibrate --drafter block`)";
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.tree.mode == TreeMode::dynamic);
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "calibrate --drafter block"));
  CHECK(contains(p.warnings[0], "dynamic tree"));

  // Optimal (not auto) block trees take the prior's Sequoia shape whatever the calibration
  // (it measures configurations, not acceptance by rank).
  ctx.feature_calibration.status = FeatureCalibration::Status::ok;
  s.auto_tree = false;
  s.tree = TreeMode::optimal;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.spec.tree.mode == TreeMode::optimal);
  CHECK(!p.spec.tree.shape_parent.empty());
  CHECK(p.acceptance_source == "prior");
  REQUIRE(p.warnings.size() == 1);
  CHECK(contains(p.warnings[0], "no rank calibration"));
}

TEST_CASE("load_feature_calibration: missing, unreadable, other files, malformed entries", "[model][calibration]") {
  ScratchModels m;
  const std::string path = calibration_path(m.drafter());
  FeatureCalibration c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  CHECK(c.status == FeatureCalibration::Status::missing);
  CHECK(contains(c.problem, "calibrate --drafter block"));
  CHECK_FALSE(c.usable());

  std::ofstream(path) << "{ not json";
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  CHECK(c.status == FeatureCalibration::Status::unreadable);

  json j{{"kind", "block"},
         {"target", calibration_file_info(m.target())},
         {"drafter", calibration_file_info(m.drafter())},
         {"baseline_tokens_per_s", 800.0},
         {"configs",
          {feature_config_json(config(TreeMode::chain, 4, 4, 2.9, 1100)),
           json{{"tree", "chain"}, {"draft_k", -1}, {"node_budget", 1}, {"depth", 1}, {"branch", 1}, {"tau", 1.0},
                {"tokens_per_s", 5000.0}},
           json{{"tree", "sideways"}}}}};
  write_calibration_file(path, j);
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  REQUIRE(c.status == FeatureCalibration::Status::ok);
  REQUIRE(c.configs.size() == 1);  // the malformed entries are skipped
  CHECK(c.configs[0].settings.draft_k == 4);
  CHECK(c.configs[0].tau == Approx(2.9));
  REQUIRE(c.best() != nullptr);
  CHECK(c.best()->tokens_per_s == Approx(1100));

  // Made for the MTP head, or for another target: not used.
  CHECK(load_feature_calibration(m.target(), m.drafter(), DrafterChoice::mtp, kSetup).status ==
        FeatureCalibration::Status::other_files);
  j["target"]["fingerprint"] = "0000000000000000";
  write_calibration_file(path, j);
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  CHECK(c.status == FeatureCalibration::Status::other_files);
  CHECK(contains(c.problem, "other model files"));

  // Another format version is refused with the reason (regression: read silently).
  j["target"] = calibration_file_info(m.target());
  j["version"] = kFeatureCalibrationVersion + 1;
  write_calibration_file(path, j);
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  CHECK(c.status == FeatureCalibration::Status::unreadable);
  CHECK_FALSE(c.usable());
  CHECK(contains(c.problem, "format version"));
  CHECK(contains(c.problem, "calibrate --drafter block"));
  j["version"] = kFeatureCalibrationVersion;
  write_calibration_file(path, j);
  CHECK(load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup).status ==
        FeatureCalibration::Status::ok);
}

TEST_CASE("cli: calibrate --drafter block, then generate --tree auto runs its choice losslessly",
          "[model][cli][calibration]") {
  ScratchModels m;
  const test::CliResult cal =
      test::run_cli({"calibrate", "--drafter", "block", "--model", m.target(), "--block-drafter", m.drafter(),
                     "--max-prompts", "2", "-n", "24", "--rounds", "1", "--json"});
  INFO(cal.describe());
  REQUIRE(cal.exit_code == 0);
  REQUIRE(cal.json_ok);
  CHECK(cal.json["path"] == calibration_path(m.drafter()));
  const int block_size = DFlashModel::load(m.drafter(), *test::bundled_pair().target)->block_size();
  CHECK(cal.json["configs"].size() == feature_calibration_grid(DrafterChoice::block, block_size).size());
  CHECK(cal.json["baseline_tokens_per_s"].get<double>() > 0);
  for (const auto& c : cal.json["configs"]) CHECK(c["tau"].get<double>() >= 1.0);
  const TimingSetup measured = setup_of_entry(cal.json);
  const FeatureCalibration fc = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, measured);
  REQUIRE(fc.usable());
  CHECK(fc.setup_note.empty());

  const std::vector<std::string> base = {"generate", "--json", "-n", "32", "--model", m.target(),
                                         "--chat", "Tell me a story about a cat."};
  std::vector<std::string> plain = base, automatic = base;
  plain.insert(plain.end(), {"--drafter", "none"});
  automatic.insert(automatic.end(), {"--drafter", "block", "--block-drafter", m.drafter(), "--tree", "auto"});
  const test::CliResult a = test::run_cli(plain), b = test::run_cli(automatic);
  INFO(a.describe());
  INFO(b.describe());
  REQUIRE(a.json_ok);
  REQUIRE(b.json_ok);
  CHECK(b.json["tokens"] == a.json["tokens"]);
  const json& plan = b.json["tree_plan"];
  CHECK(plan["timings_source"] == "calibration");
  CHECK(plan["calibration"] == calibration_path(m.drafter()));
  const FeatureConfigResult* best = fc.best();
  if (best) {
    CHECK(plan["tree"] == tree_mode_name(best->settings.tree));
  } else {
    CHECK(plan["tree"] == "none");
  }
}

TEST_CASE("load_feature_calibration: one measurement per setup, the latest with a note for another",
          "[model][calibration]") {
  // Regression: the file held one measurement, so calibrating with another thread count or KV
  // type replaced the first, and a run with any setup used whatever was measured last, silently.
  ScratchModels m;
  const std::string path = calibration_path(m.drafter());
  const auto measurement = [&](int threads, const std::string& kv, double chain_tps) {
    return json{{"threads", threads}, {"kv_type", kv}, {"activations", "f32"}, {"baseline_tokens_per_s", 800.0},
                {"configs", {feature_config_json(config(TreeMode::chain, 3, 3, 2.5, chain_tps))}}};
  };
  json doc{{"kind", "block"}, {"target", calibration_file_info(m.target())}, {"drafter", calibration_file_info(m.drafter())}};
  const json a = measurement(1, "f16", 1000), b = measurement(1, "f32", 1500);
  for (const auto& [k, v] : b.items()) doc[k] = v;  // the latest at the top level
  doc["by_setup"] = with_setup_entry(with_setup_entry(json::array(), a), b);
  REQUIRE(doc["by_setup"].size() == 2);
  write_calibration_file(path, doc);
  FeatureCalibration c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, {1, "f16", "f32"});
  REQUIRE(c.usable());
  CHECK(c.setup_note.empty());
  CHECK(c.threads == 1);
  CHECK(c.configs.at(0).tokens_per_s == Approx(1000));
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, {1, "f32", "f32"});
  CHECK(c.setup_note.empty());
  CHECK(c.configs.at(0).tokens_per_s == Approx(1500));
  // No measurement for this setup: the latest, with a note naming both setups.
  c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, {1, "f32", "q8"});
  REQUIRE(c.usable());
  CHECK(c.configs.at(0).tokens_per_s == Approx(1500));
  CHECK(contains(c.setup_note, "f32 KV cache, f32 activations"));
  CHECK(contains(c.setup_note, "1 thread, f32 KV cache, q8 activations"));
  // The planner passes the note on as a warning.
  PlanContext ctx = block_ctx();
  ctx.feature_calibration = c;
  SpecSettings s;
  s.drafter = DrafterChoice::block;
  s.auto_tree = true;
  s.draft_k = 4;
  const TreePlan p = RequestPlanner::plan_tree(s, ctx);
  bool warned = false;
  for (const std::string& w : p.warnings) warned = warned || contains(w, "calibrate --drafter block");
  CHECK(warned);
  // A same-setup entry is replaced, not added.
  CHECK(with_setup_entry(doc["by_setup"], measurement(1, "f16", 1200)).size() == 2);
  json q8 = measurement(1, "f16", 1200);
  q8["activations"] = "q8";
  CHECK(with_setup_entry(doc["by_setup"], q8).size() == 3);
}

TEST_CASE("cli: calibrate --drafter block keeps the measurement of another setup", "[model][cli][calibration]") {
  ScratchModels m;
  const std::vector<std::string> cal = {"calibrate", "--drafter", "block", "--model", m.target(), "--block-drafter",
                                        m.drafter(), "--max-prompts", "1", "-n", "8", "--rounds", "1", "--json"};
  std::vector<std::string> one = cal, f32 = cal;
  one.insert(one.end(), {"--threads", "1"});
  f32.insert(f32.end(), {"--threads", "1", "--kv-type", "f32"});
  const test::CliResult r1 = test::run_cli(one);
  INFO(r1.describe());
  REQUIRE(r1.exit_code == 0);
  const test::CliResult r2 = test::run_cli(f32);
  INFO(r2.describe());
  REQUIRE(r2.exit_code == 0);
  std::ifstream in(calibration_path(m.drafter()));
  const json doc = json::parse(in);
  REQUIRE(doc["by_setup"].size() == 2);
  CHECK(doc["kv_type"] == "f32");  // the latest at the top level
  CHECK(load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, {1, "f16", "f32"}).setup_note.empty());
  CHECK(load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, {1, "f32", "f32"}).setup_note.empty());
}

TEST_CASE("feature calibration: entries past the option limits are refused and plans are clamped", "[unit][calibration]") {
  // Regression: a configs entry with "branch": 1000 was taken as measured, and generate --tree
  // auto then expanded 1000 children per node (a hang and 4 GB) though --branch stops at 32.
  const FeatureConfigResult ok = config(TreeMode::dynamic, 16, 7, 3.0, 1500);
  FeatureConfigResult r;
  REQUIRE(feature_config_from_json(feature_config_json(ok), DrafterChoice::block, &r));
  for (const auto& [key, value] : {std::pair<const char*, int>{"branch", kMaxBranch + 1}, {"branch", 1000},
                                   {"node_budget", kMaxNodeBudget + 1}, {"draft_k", kMaxNodeBudget + 1},
                                   {"depth", kMaxDepth + 1}}) {
    json j = feature_config_json(ok);
    j[key] = value;
    INFO(key << " = " << value);
    CHECK_FALSE(feature_config_from_json(j, DrafterChoice::block, &r));
  }
  // A measurement built in memory with a huge branch (as a hand-edited file once gave) is
  // clamped by the planner to what the options allow.
  PlanContext ctx = block_ctx();
  FeatureConfigResult huge = ok;
  huge.settings.branch = 1000;
  ctx.feature_calibration.configs = {huge};
  SpecSettings s;
  s.drafter = DrafterChoice::block;
  s.auto_tree = true;
  TreePlan p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.settings.branch == kMaxBranch);
  CHECK(p.spec.tree.branch <= kMaxBranch);
  // So are settings given directly (the API and the app's settings pass through here too).
  s.auto_tree = false;
  s.tree = TreeMode::dynamic;
  s.branch = 1000;
  p = RequestPlanner::plan_tree(s, ctx);
  CHECK(p.settings.branch == kMaxBranch);
}

TEST_CASE("load_feature_calibration: values of the wrong JSON type are ignored and never thrown", "[model][calibration]") {
  // Regression: `"kind": 5` made nlohmann's value() throw type_error out of the loader, and
  // generate, chat, compare and serve exited with the raw exception.
  ScratchModels m;
  const std::string path = calibration_path(m.drafter());
  json doc{{"kind", 5},
           {"target", calibration_file_info(m.target())},
           {"drafter", calibration_file_info(m.drafter())},
           {"threads", 2},
           {"baseline_tokens_per_s", 800.0},
           {"configs", {feature_config_json(config(TreeMode::chain, 3, 3, 2.5, 1000))}}};
  write_calibration_file(path, doc);
  FeatureCalibration c;
  REQUIRE_NOTHROW(c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup));
  CHECK(c.status == FeatureCalibration::Status::other_files);
  CHECK_FALSE(c.usable());
  doc["kind"] = "block";
  doc["baseline_tokens_per_s"] = "fast";
  doc["by_setup"] = json::array({json{{"threads", "two"}, {"kv_type", 16}}, json{{"backend", 5}, {"threads", 2}}});
  doc["configs"] = {json{{"tree", 3}}, feature_config_json(config(TreeMode::chain, 3, 3, 2.5, 1000))};
  write_calibration_file(path, doc);
  REQUIRE_NOTHROW(c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup));
  CHECK(c.status == FeatureCalibration::Status::ok);
  CHECK(c.configs.size() == 1);
}

TEST_CASE("feature calibration: numbers that wrap or are not whole are refused", "[unit][calibration]") {
  // Regression: get<int>() wrapped 2^32 + 3 to 3 and cut 3.7 to 3, and a negative tau was
  // taken: all three configurations ran as if measured.
  const FeatureConfigResult ok = config(TreeMode::dynamic, 16, 7, 3.0, 1500);
  FeatureConfigResult r;
  for (const char* key : {"branch", "node_budget", "depth", "draft_k"}) {
    for (const json& bad : {json(4294967299LL), json(3.7), json(18446744073709551615ULL), json("3")}) {
      json j = feature_config_json(ok);
      j[key] = bad;
      INFO(key << " = " << bad.dump());
      CHECK_FALSE(feature_config_from_json(j, DrafterChoice::block, &r));
    }
  }
  json j = feature_config_json(ok);
  j["tau"] = -2.0;
  CHECK_FALSE(feature_config_from_json(j, DrafterChoice::block, &r));
}

TEST_CASE("load_feature_calibration: a measurement without a whole thread count is not used", "[model][calibration]") {
  // Regression: "threads": "x" gave the note "measured with 2 threads, ... not this run's 2
  // threads, ..." (the same setup twice) and used the measurement.
  ScratchModels m;
  json doc{{"kind", "block"},
           {"target", calibration_file_info(m.target())},
           {"drafter", calibration_file_info(m.drafter())},
           {"threads", "x"},
           {"baseline_tokens_per_s", 800.0},
           {"configs", {feature_config_json(config(TreeMode::chain, 3, 3, 2.5, 1000))}}};
  write_calibration_file(calibration_path(m.drafter()), doc);
  const FeatureCalibration c = load_feature_calibration(m.target(), m.drafter(), DrafterChoice::block, kSetup);
  CHECK_FALSE(c.usable());
  CHECK(c.setup_note.empty());
  CHECK(contains(c.problem, "thread count"));
}
