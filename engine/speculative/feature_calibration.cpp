#include "engine/speculative/feature_calibration.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"

namespace specchat {

using nlohmann::json;

namespace {

SpecSettings base(DrafterChoice d) {
  SpecSettings s;
  s.drafter = d;
  s.auto_tree = false;
  return s;
}

}  // namespace

const FeatureConfigResult* FeatureCalibration::best() const {
  const FeatureConfigResult* b = nullptr;
  for (const FeatureConfigResult& r : configs) {
    if (!b || r.tokens_per_s > b->tokens_per_s) b = &r;
  }
  return b && b->tokens_per_s > baseline_tokens_per_s ? b : nullptr;
}

std::vector<SpecSettings> feature_calibration_grid(DrafterChoice drafter, int block_size) {
  std::vector<SpecSettings> out;
  if (drafter == DrafterChoice::block) {
    if (block_size < 2) throw std::invalid_argument("feature_calibration_grid: block size " + std::to_string(block_size));
    const int deepest = block_size - 1;
    for (int k = 1; k <= deepest; ++k) {
      SpecSettings s = base(drafter);
      s.tree = TreeMode::chain;
      s.draft_k = s.node_budget = s.depth = k;
      out.push_back(s);
    }
    for (int branch : {2, 3}) {
      for (int n : {8, 12, 16, 24, 32}) {
        SpecSettings s = base(drafter);
        s.tree = TreeMode::dynamic;
        s.draft_k = deepest;
        s.node_budget = n;
        s.depth = std::min(deepest, n);
        s.branch = branch;
        out.push_back(s);
      }
    }
  } else if (drafter == DrafterChoice::mtp) {
    for (int k = 1; k <= 4; ++k) {
      SpecSettings s = base(drafter);
      s.tree = TreeMode::chain;
      s.draft_k = s.node_budget = s.depth = k;
      out.push_back(s);
    }
    for (int n : {6, 10, 16}) {
      SpecSettings s = base(drafter);
      s.tree = TreeMode::dynamic;
      s.draft_k = 4;
      s.node_budget = n;
      s.depth = 4;
      s.branch = 2;
      out.push_back(s);
    }
  } else {
    throw std::invalid_argument(std::string("feature_calibration_grid: not a feature drafter: ") +
                                drafter_choice_name(drafter));
  }
  return out;
}

json feature_config_json(const FeatureConfigResult& r) {
  const SpecSettings& s = r.settings;
  return json{{"tree", tree_mode_name(s.tree)}, {"draft_k", s.draft_k}, {"node_budget", s.node_budget},
              {"depth", s.depth},              {"branch", s.branch},   {"tau", r.tau},
              {"tokens_per_s", r.tokens_per_s}};
}

bool feature_config_from_json(const json& j, DrafterChoice drafter, FeatureConfigResult* out) {
  try {
    FeatureConfigResult r;
    r.settings = base(drafter);
    if (!parse_tree_mode(j.at("tree").get<std::string>(), &r.settings.tree)) return false;
    if (r.settings.tree == TreeMode::optimal) return false;  // no shape stored: not a candidate
    // Whole numbers within the options' ranges (get<int>() would wrap 2^32 + 3 to 3 and cut 3.7
    // to 3): an entry past them was not measured by `calibrate` (hand-edited).
    const auto whole = [&](const char* key, int hi, int* out) {
      const json& v = j.at(key);
      if (!v.is_number_integer()) return false;
      const int64_t x = v.get<int64_t>();
      if (x < 1 || x > hi) return false;
      *out = static_cast<int>(x);
      return true;
    };
    if (!whole("draft_k", kMaxNodeBudget, &r.settings.draft_k) ||
        !whole("node_budget", kMaxNodeBudget, &r.settings.node_budget) || !whole("depth", kMaxDepth, &r.settings.depth) ||
        !whole("branch", kMaxBranch, &r.settings.branch)) {
      return false;
    }
    r.tau = j.at("tau").get<double>();
    r.tokens_per_s = j.at("tokens_per_s").get<double>();
    // τ counts the bonus token: at least 1 per step (0 in a file written before it was measured).
    if (!std::isfinite(r.tau) || r.tau < 0 || !std::isfinite(r.tokens_per_s) || r.tokens_per_s < 0) return false;
    *out = r;
    return true;
  } catch (const json::exception&) {
    return false;
  }
}

namespace {

FeatureCalibration load_unguarded(const std::string& target_path, const std::string& drafter_path,
                                  DrafterChoice drafter, const TimingSetup& setup, const std::string& path) {
  FeatureCalibration c;
  const std::string name = drafter == DrafterChoice::block ? "block" : "mtp";
  c.path = path;
  std::error_code ec;
  if (std::filesystem::exists(c.path, ec) && !json_regular_file(c.path)) {  // a FIFO would block the read
    c.status = FeatureCalibration::Status::unreadable;
    c.problem = "calibration " + c.path + " is not a regular file";
    return c;
  }
  std::ifstream in(c.path);
  if (!in) {
    c.problem = "no calibration at " + c.path + " (run `specchat-cli calibrate --drafter " + name + "`)";
    return c;
  }
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    c.status = FeatureCalibration::Status::unreadable;
    c.problem = "calibration " + c.path + " is not a JSON object";
    return c;
  }
  if (std::string v = calibration_version_problem(doc, kFeatureCalibrationVersion, c.path,
                                                  "specchat-cli calibrate --drafter " + name);
      !v.empty()) {
    c.status = FeatureCalibration::Status::unreadable;
    c.problem = std::move(v);
    return c;
  }
  if (json_string_or(doc, "kind") != name || !calibration_describes_file(json_member(doc, "target"), target_path) ||
      !calibration_describes_file(json_member(doc, "drafter"), drafter_path)) {
    c.status = FeatureCalibration::Status::other_files;
    c.problem = "calibration " + c.path + " was made for other model files (re-run `specchat-cli calibrate --drafter " +
                name + "`)";
    return c;
  }
  c.status = FeatureCalibration::Status::ok;
  // The measurement of this setup: from the list (newest first), else the top level's (the
  // latest measurement; the only one in files written before the list), noted when it differs.
  // By reference: nothing of the file is copied (a deeply nested value cannot exhaust the stack).
  const json* chosen = &doc;
  bool found = entry_matches_setup(doc, setup);
  const json& by_setup = json_member(doc, "by_setup");
  if (!found && by_setup.is_array()) {
    for (auto it = by_setup.rbegin(); it != by_setup.rend() && !found; ++it) {
      if (entry_matches_setup(*it, setup)) {
        chosen = &*it;
        found = true;
      }
    }
  }
  const json& m = *chosen;
  const auto th = m.find("threads");
  if (th != m.end() && !th->is_number_integer()) {  // which setup it describes is unknown
    c.problem = "calibration " + c.path + " does not record the thread count it was measured with (re-run " +
                "`specchat-cli calibrate --drafter " + name + "`)";
    return c;
  }
  c.measured = setup_of_entry(m);
  if (!found) {
    c.setup_note = "the " + name + " drafter's calibration was measured with " + describe_setup(c.measured) +
                   ", not this run's " + describe_setup(setup) + ": its choice may not be the fastest here (re-run " +
                   "`specchat-cli calibrate --drafter " + name + "` with these settings)";
  }
  c.threads = c.measured.threads;
  const json& base_tps = json_member(m, "baseline_tokens_per_s");
  c.baseline_tokens_per_s = base_tps.is_number() ? base_tps.get<double>() : 0.0;
  const json& list = json_member(m, "configs");
  if (list.is_array()) {
    for (const json& j : list) {
      FeatureConfigResult r;
      if (feature_config_from_json(j, drafter, &r)) c.configs.push_back(r);
    }
  }
  if (!c.usable()) c.problem = "calibration " + c.path + " has no usable measurements";
  return c;
}

FeatureCalibration load_at(const std::string& target_path, const std::string& drafter_path, DrafterChoice drafter,
                           const TimingSetup& setup, const std::string& path) {
  try {
    return load_unguarded(target_path, drafter_path, drafter, setup, path);
  } catch (const std::exception& e) {  // a shape no reader above foresaw: unreadable, never fatal
    FeatureCalibration c;
    c.path = path;
    c.status = FeatureCalibration::Status::unreadable;
    c.problem = "calibration " + c.path + " could not be read (" + e.what() + ")";
    return c;
  }
}

}  // namespace

FeatureCalibration load_feature_calibration(const std::string& target_path, const std::string& drafter_path,
                                            DrafterChoice drafter, const TimingSetup& setup) {
  const std::string read = calibration_read_path(target_path, drafter_path), beside = calibration_path(drafter_path);
  FeatureCalibration c = load_at(target_path, drafter_path, drafter, setup, read);
  // The user's own calibration unusable: the one beside the drafter still plans (as
  // load_calibration does), with a note saying why the user's was passed over.
  if (read != beside && !c.usable()) {
    FeatureCalibration b = load_at(target_path, drafter_path, drafter, setup, beside);
    if (b.usable()) {
      b.note = "your calibration " + read + " is not used (" +
               (c.problem.empty() ? std::string("no usable measurement") : c.problem) + "); planning from " + beside;
      c = std::move(b);
    }
  }
  return c;
}

}  // namespace specchat
