// `specchat-cli calibrate --drafter block|mtp`: measured configurations of a drafter that reads
// the target's hidden states (engine/speculative/feature_calibration.h), behind `--tree auto`.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "app/cli/calibrate.h"
#include "app/cli/feature_drafters.h"
#include "engine/model.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"
#include "engine/speculative/feature_calibration.h"

namespace specchat::cli {

using nlohmann::json;

namespace {

struct Totals {
  long generated = 0, produced = 0, steps = 0;
  double decode_ms = 0;
  void add(const GenerationStats& s) {
    generated += s.n_generated;
    produced += std::max(s.n_target_tokens, s.n_generated);
    steps += s.n_steps;
    decode_ms += s.decode_ms;
  }
  double tokens_per_s() const { return decode_ms > 0 ? 1000.0 * static_cast<double>(generated) / decode_ms : 0.0; }
  double tau() const { return steps > 0 ? static_cast<double>(produced) / static_cast<double>(steps) : 0.0; }
};

std::string describe(const SpecSettings& s) {
  if (s.tree == TreeMode::chain) return "chain k=" + std::to_string(s.draft_k);
  return "dynamic N=" + std::to_string(s.node_budget) + " D=" + std::to_string(s.depth) +
         " K=" + std::to_string(s.branch);
}

}  // namespace

int cmd_calibrate_feature(const CalibrateOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const DrafterChoice kind = o.drafter == "block" ? DrafterChoice::block : DrafterChoice::mtp;
  PairOptions po;
  po.target_path = o.model;
  po.n_threads = o.threads;
  po.kv_type = parse_kv_type(o.kv_type);
  po.activations = parse_activations(o.activations);
  ModelPair pair = ModelPair::load(po);
  for (const std::string& w : pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const std::string prompts_path = find_prompts_file(o.prompts);
  const auto prompts = load_prompts(pair, prompts_path, o.max_prompts > 0 ? o.max_prompts : 12);
  check_prompts_fit(prompts, pair.target->n_ctx(), prompts_path);

  Generator gen(*pair.target, nullptr);
  CommonOptions co;
  co.drafter = o.drafter;
  co.draft_k = 4;
  co.block_drafter = o.block_drafter;
  co.mtp = o.mtp;
  co.threads = o.threads;
  const FeatureDrafters fd = install_feature_drafters(gen.engine(), co);
  const std::string drafter_path = kind == DrafterChoice::block ? fd.block_path : fd.mtp_path;
  check_calibration_output(o.out.empty() ? calibration_write_path(pair.target->path(), drafter_path) : o.out);
  const std::vector<SpecSettings> grid = feature_calibration_grid(kind, fd.block_size);

  auto run = [&](const std::vector<int32_t>& prompt, const SpecSettings* s) {
    gen.clear_cache();
    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = o.n;
    if (s) {
      req.spec = to_spec_config(*s);
    } else {
      req.spec.draft_k = 0;
    }
    return gen.generate(req);
  };
  Totals base;
  std::vector<Totals> totals(grid.size());
  int used = 0;
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t pi = 0; pi < prompts.size(); ++pi) {
      const auto& prompt = prompts[pi];
      if (static_cast<int>(prompt.size()) + 1 >= pair.target->n_ctx()) continue;
      if (round == 0) ++used;
      // Plain decoding and every configuration, starting at a rotating position so that no
      // configuration always runs first (or last) on a prompt.
      const GenerationResult want = run(prompt, nullptr);
      base.add(want.stats);
      const size_t start = (pi * 7 + static_cast<size_t>(round) * 3) % grid.size();
      for (size_t j = 0; j < grid.size(); ++j) {
        const size_t c = (start + j) % grid.size();
        const GenerationResult got = run(prompt, &grid[c]);
        if (got.tokens != want.tokens) {
          throw std::runtime_error("calibration: " + describe(grid[c]) + " changed the greedy output of prompt " +
                                   std::to_string(pi) + " (the drafter must never change it; please report)");
        }
        totals[c].add(got.stats);
      }
    }
  }
  if (base.generated == 0) throw std::runtime_error("calibration: no prompt produced a token");
  warn_small_sample(base.generated / o.rounds, "target tokens per round");

  json j;
  j["version"] = kFeatureCalibrationVersion;
  j["date"] = utc_now_iso8601();
  j["backend"] = kCalibrationBackend;
  j["kind"] = o.drafter;
  // The setup as the target runs it (timing_setup_of: an f16 target rounds no activations
  // whatever --activations says), which is what a plan is matched against.
  const TimingSetup setup = timing_setup_of(*pair.target, o.threads);
  j["threads"] = setup.threads;
  j["kv_type"] = setup.kv_type;
  j["activations"] = setup.activations;
  j["machine"] = setup.machine;  // its tokens/s hold on this machine only
  j["target"] = calibration_file_info(pair.target->path());
  j["drafter"] = calibration_file_info(drafter_path);
  j["prompts"] = used;
  j["rounds"] = o.rounds;
  j["n"] = o.n;
  j["baseline_tokens_per_s"] = base.tokens_per_s();
  FeatureCalibration fc;
  fc.status = FeatureCalibration::Status::ok;
  fc.baseline_tokens_per_s = base.tokens_per_s();
  j["configs"] = json::array();
  for (size_t c = 0; c < grid.size(); ++c) {
    FeatureConfigResult r{grid[c], totals[c].tau(), totals[c].tokens_per_s()};
    j["configs"].push_back(feature_config_json(r));
    fc.configs.push_back(r);
  }
  const FeatureConfigResult* best = fc.best();
  j["auto_choice"] = best ? feature_config_json(*best) : json{{"tree", "none"}};
  const std::string out = o.out.empty() ? calibration_write_path(pair.target->path(), drafter_path) : o.out;
  // One measurement per setup: this one beside those of other setups in the file it replaces
  // (same kind and model files).
  json entry = json::object();
  for (const char* k : {"date", "threads", "kv_type", "activations", "machine", "prompts", "rounds", "n",
                        "baseline_tokens_per_s", "configs", "auto_choice"}) {
    entry[k] = j[k];
  }
  json previous_list = json::array();
  if (std::ifstream old_in(out); old_in) {
    const json previous = json::parse(old_in, nullptr, false);
    if (previous.is_object() && json_string_or(previous, "kind") == o.drafter &&
        calibration_describes_file(previous.value("target", json()), pair.target->path()) &&
        calibration_describes_file(previous.value("drafter", json()), drafter_path)) {
      previous_list = previous.value("by_setup", json());
      if (!previous_list.is_array()) {  // a file written before the list: its one measurement
        previous_list = json::array();
        json old = json::object();
        for (const char* k : {"date", "threads", "kv_type", "activations", "machine", "prompts", "rounds", "n",
                              "baseline_tokens_per_s", "configs", "auto_choice"}) {
          if (previous.contains(k)) old[k] = previous[k];
        }
        previous_list.push_back(old);
      }
    }
  }
  // Only measurements a run could use are kept: a malformed entry would stay in the file forever.
  json kept = json::array();
  for (const json& e : previous_list) {
    const bool usable = e.is_object() && e.contains("threads") && e["threads"].is_number_integer() &&
                        e.contains("configs") && e["configs"].is_array();
    if (usable) kept.push_back(e);
  }
  j["by_setup"] = with_setup_entry(kept, entry);
  write_calibration_file(out, j);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.json) {
    print_calibration_json(j, out, secs);
    return 0;
  }
  std::printf("calibration of the %s drafter written to %s (%d prompts x %d rounds, %.1f s)\n", o.drafter.c_str(),
              out.c_str(), used, o.rounds, secs);
  std::printf("  %-26s %6s %10s %8s\n", "configuration", "tau", "tokens/s", "vs plain");
  std::printf("  %-26s %6.2f %10.1f %8s\n", "plain decoding", base.tau(), base.tokens_per_s(), "1.00x");
  for (const FeatureConfigResult& r : fc.configs) {
    std::printf("  %-26s %6.2f %10.1f %7.2fx%s\n", describe(r.settings).c_str(), r.tau, r.tokens_per_s,
                r.tokens_per_s / base.tokens_per_s(), best == &r ? "  <- auto" : "");
  }
  if (!best) std::printf("  no configuration beat plain decoding: --tree auto decodes plainly\n");
  return 0;
}

}  // namespace specchat::cli
