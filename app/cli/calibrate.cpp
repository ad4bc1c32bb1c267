#include "app/cli/calibrate.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <utility>

#include "engine/model.h"
#include "engine/runtime/request_planner.h"
#include "engine/speculative/calibration.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/calibration_store.h"
#include "engine/speculative/sequoia.h"
#include "app/cli/data_files.h"

namespace specchat::cli {

namespace fs = std::filesystem;
using nlohmann::json;

std::string find_prompts_file(const std::string& given) {
  return given.empty() ? bundled_data_file("heldout_prompts.json") : given;
}

// {"prompts": [{"kind": "text"|"chat", "text": ...}]} or a plain array of strings (raw text).
std::vector<std::vector<int32_t>> load_prompts(const ModelPair& pair, const std::string& path, int max_prompts) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read prompts file " + path);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) throw std::runtime_error("prompts file " + path + " is not JSON");
  const json& list = j.is_object() && j.contains("prompts") ? j.at("prompts") : j;
  if (!list.is_array()) throw std::runtime_error("prompts file " + path + ": expected a list of prompts");
  std::vector<std::vector<int32_t>> out;
  for (const json& p : list) {
    if (max_prompts > 0 && static_cast<int>(out.size()) >= max_prompts) break;
    if (p.is_string()) {
      out.push_back(pair.encode_prompt(p.get<std::string>()));
    } else if (p.is_object() && p.contains("text") && p.at("text").is_string()) {
      const std::string text = p.at("text").get<std::string>();
      out.push_back(p.value("kind", std::string("text")) == "chat" ? pair.encode_chat({{"user", text}})
                                                                     : pair.encode_prompt(text));
    } else {
      throw std::runtime_error("prompts file " + path + ": a prompt is neither a string nor {\"text\": ...}");
    }
  }
  if (out.empty()) throw std::runtime_error("prompts file " + path + " has no prompts");
  return out;
}

void add_calibrate_options(CLI::App& cmd, CalibrateOptions& o) {
  cmd.add_option("--model,-m", o.model, "target model GGUF (default: the bundled target)");
  cmd.add_option("--draft,-d", o.draft,
                 "draft model GGUF or 'bundled' (default: as generate: the bundled draft for the bundled target; "
                 "with --model, the draft picked beside it)");
  cmd.add_option("--prompts", o.prompts, "held-out prompts JSON (default: tests/data/heldout_prompts.json)");
  cmd.add_option("--out,-o", o.out, "calibration file (default: <draft without .gguf>.calibration.json beside the draft; for the "
                 "bundled models, or a read-only folder, ~/.cache/specchat/calibrations/, which plans then read "
                 "first)");
  cmd.add_option("-n,--max-tokens", o.n, "target tokens generated per prompt")->check(CLI::Range(1, 4096));
  cmd.add_option("--ranks", o.ranks, "draft ranks counted (rank >= this is a miss)")->check(CLI::Range(1, 64));
  cmd.add_option("--max-prompts", o.max_prompts, "use at most this many prompts (0 = all)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--reps", o.reps, "timed forwards per measurement (the fastest counts)")->check(CLI::Range(1, 100));
  cmd.add_option("--threads", o.threads, "CPU threads of the engine's pool (0 = all cores; more than the cores is capped)")->check(CLI::Range(0, 256));
  cmd.add_flag("--json", o.json, "print the calibration as JSON");
  cmd.add_option("--drafter", o.drafter,
                 "what to calibrate: model (the draft model), block (DFlash block drafter) or mtp (MTP head)")
      ->check(CLI::IsMember({"model", "block", "mtp"}));
  cmd.add_option("--block-drafter", o.block_drafter, "DFlash block drafter GGUF (default: found beside the target)");
  cmd.add_option("--mtp", o.mtp, "MTP head GGUF (default: found beside the target)");
  cmd.add_option("--rounds", o.rounds, "block/mtp: passes over the prompts")->check(CLI::Range(1, 100));
  // As generate's: the timings are kept per KV type and activation rounding (a plan uses only
  // timings measured the way it runs).
  cmd.add_option("--kv-type", o.kv_type, "KV cache element type the timings run with: f16 (default) or f32")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd.add_option("--activations", o.activations,
                 "quantized matrices on the CPU: q8 (default; 8-bit activations) or f32, as generate's --activations")
      ->check(CLI::IsMember({"q8", "f32"}));
}

std::string refused_calibrate_combination(const CLI::App& cal, const CalibrateOptions& o) {
  const auto given = [&](const char* flag) {
    const CLI::Option* opt = cal.get_option_no_throw(flag);
    return opt != nullptr && opt->count() > 0;
  };
  const bool model = o.drafter == "model";
  if (model && (o.draft == "ngram" || o.draft == "none")) {
    return "calibrate needs a draft model (a GGUF file or 'bundled'), not '" + o.draft + "'";
  }
  for (const char* f : {"--ranks", "--reps", "--draft"}) {
    if (!model && given(f)) {
      return std::string(f) + " applies to --drafter model (the draft model's calibration), not --drafter " +
             o.drafter + ": leave it out";
    }
  }
  if (model && given("--rounds")) {
    return "--rounds applies to --drafter block and mtp (passes over the prompts), not the draft model's "
           "calibration: leave it out or add --drafter block|mtp";
  }
  for (const auto& [flag, kind] : {std::pair<const char*, const char*>{"--block-drafter", "block"}, {"--mtp", "mtp"}}) {
    if (given(flag) && o.drafter != kind) {
      return std::string(flag) + " applies to --drafter " + kind + " (the drafter calibrated is " + o.drafter +
             "): add --drafter " + kind + " or leave it out";
    }
  }
  return {};
}

void check_calibration_output(const std::string& path) {
  const auto refuse = [&](const std::string& why) {
    throw std::runtime_error("cannot write the calibration to " + path + ": " + why);
  };
  std::error_code ec;
  if (path.empty()) refuse("an empty name (leave --out out for the file beside the drafter)");
  if (fs::is_directory(path, ec)) refuse("it is a folder (give a file name)");
  const fs::file_status st = fs::symlink_status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    refuse(fs::is_symlink(st) ? "it is a symbolic link (give the file it points to)"
                              : "it is not a regular file (a device, pipe or socket)");
  }
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) refuse("the folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) refuse("the folder " + dir.string() + " is not writable");
  if (fs::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) refuse("the file is not writable");
  // The file is written as PATH.tmp, then renamed: make sure that can be created (root passes
  // access() on folders such as /proc where nothing can be created).
  const std::string tmp = path + ".tmp";
  const bool had_tmp = fs::exists(tmp, ec);
  if (!std::ofstream(tmp, std::ios::app)) refuse("cannot create " + tmp);
  if (!had_tmp) fs::remove(tmp, ec);
}

void check_prompts_fit(const std::vector<std::vector<int32_t>>& prompts, int n_ctx, const std::string& path) {
  for (const auto& p : prompts) {
    if (static_cast<int>(p.size()) + 1 < n_ctx) return;
  }
  throw std::runtime_error("calibration: none of the " + std::to_string(prompts.size()) + " prompts of " + path +
                           " leaves room to generate in the target's context of " + std::to_string(n_ctx) +
                           " tokens: give shorter prompts (--prompts FILE)");
}

void warn_small_sample(int64_t positions, const std::string& what) {
  if (positions >= kCalibrationMinPositions) return;
  std::fprintf(stderr,
               "warning: the calibration measured only %lld %s (fewer than %lld): its numbers are noisy; use more "
               "prompts (--max-prompts) or longer replies (-n)\n",
               static_cast<long long>(positions), what.c_str(), static_cast<long long>(kCalibrationMinPositions));
}

void print_calibration_json(const nlohmann::json& cal, const std::string& path, double seconds) {
  json shown = cal;
  shown["path"] = path;
  shown["seconds"] = seconds;
  std::cout << shown.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

int cmd_calibrate(const CalibrateOptions& o) {
  if (o.drafter == "block" || o.drafter == "mtp") return cmd_calibrate_feature(o);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (o.draft == "ngram" || o.draft == "none") {
    throw std::runtime_error("calibrate needs a draft model (a GGUF file or 'bundled'), not '" + o.draft + "'");
  }
  PairOptions po;
  po.target_path = o.model;
  // The draft generate would use (apply_draft), so that `generate --model X --tree auto` reads
  // what `calibrate --model X` wrote.
  CommonOptions given;
  given.model = o.model;
  given.draft = o.draft;
  apply_draft(given, true, po);
  po.n_threads = o.threads;
  po.kv_type = parse_kv_type(o.kv_type);
  po.activations = parse_activations(o.activations);
  ModelPair pair = ModelPair::load(po);
  for (const std::string& w : pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (!pair.draft) {
    throw std::runtime_error("calibrate: no draft model for " + o.model + " (" + pair.draft_choice.reason +
                             "): pass --draft FILE");
  }
  if (po.auto_draft) std::fprintf(stderr, "draft: %s (%s)\n", pair.draft->path().c_str(), pair.draft_choice.reason.c_str());
  LlamaModel& target = *pair.target;
  LlamaModel& draft = *pair.draft;
  check_calibration_output(o.out.empty() ? calibration_write_path(target.path(), draft.path()) : o.out);
  const std::string prompts_path = find_prompts_file(o.prompts);
  const auto prompts = load_prompts(pair, prompts_path, o.max_prompts);
  check_prompts_fit(prompts, target.n_ctx(), prompts_path);

  // Acceptance by rank: the target decodes greedily; the draft ranks each chosen token.
  Generator gen(target, nullptr);
  RankCounts counts;
  counts.hits.assign(static_cast<size_t>(o.ranks), 0);
  std::vector<int32_t> timing_ctx;
  // The rank sequences behind RankPathModel, one per prompt, up to kMaxRankPathRanks in all.
  std::vector<std::vector<int8_t>> rank_paths;
  std::vector<std::string> rank_path_texts;
  int64_t path_ranks = 0;
  int used = 0;
  for (const auto& prompt : prompts) {
    if (static_cast<int>(prompt.size()) >= target.n_ctx()) continue;  // no room to generate
    GenerateRequest req;
    req.prompt = prompt;
    req.max_tokens = o.n;
    req.spec.draft_k = 0;
    const GenerationResult r = gen.generate(req);
    std::vector<int32_t> ctx = prompt;
    ctx.insert(ctx.end(), r.tokens.begin(), r.tokens.end());
    if (r.tokens.empty()) continue;
    // A generation that ran to the end of the context holds n_ctx + 1 tokens; the last one has
    // no KV slot in the draft either.
    if (ctx.size() > static_cast<size_t>(draft.n_ctx())) ctx.resize(static_cast<size_t>(draft.n_ctx()));
    if (ctx.size() <= prompt.size()) continue;
    std::vector<int8_t> ranks;
    count_draft_ranks(draft, ctx, static_cast<int>(prompt.size()), counts, &ranks);
    if (path_ranks + static_cast<int64_t>(ranks.size()) <= kMaxRankPathRanks) {
      path_ranks += static_cast<int64_t>(ranks.size());
      rank_path_texts.push_back(rank_path_text(ranks));
      rank_paths.push_back(std::move(ranks));
    }
    if (timing_ctx.size() < static_cast<size_t>(kCalibrationTimingContext) && ctx.size() > timing_ctx.size()) {
      timing_ctx = calibration_timing_context(ctx, target.n_ctx());
    }
    ++used;
  }
  if (counts.positions() == 0) throw std::runtime_error("calibration: no prompt produced a token");
  warn_small_sample(counts.positions(), "target tokens");
  gen.clear_cache();  // cold caches for the timings
  double disorder = 1.0;
  const StepTimings t = measure_step_timings(target, &draft, timing_ctx, calibration_verify_nodes(),
                                             calibration_draft_widths(), o.reps, &disorder);
  if (disorder > kTimingNoiseRatio) {
    std::fprintf(stderr,
                 "warning: the timings were disturbed (a size measured %.2fx a larger one: other programs busy on the "
                 "cores?): --tree auto will not plan from this table but time the models itself; re-run calibrate on "
                 "a quiet machine\n",
                 disorder);
  }
  const std::vector<double> a = counts.accept_by_rank();

  json j;
  j["version"] = kCalibrationVersion;
  j["date"] = utc_now_iso8601();
  j["backend"] = kCalibrationBackend;
  j["target"] = calibration_file_info(target.path());
  j["draft"] = calibration_file_info(draft.path());
  j["acceptance"] = {{"ranks", o.ranks},           {"accept_by_rank", a},
                     {"hits", counts.hits},         {"misses", counts.misses},
                     {"positions", counts.positions()}, {"prompts", used},
                     {"prompts_file", fs::path(prompts_path).filename().string()}, {"n", o.n},
                     {"rank_paths", rank_path_texts}};
  // The tables of other setups in the file this replaces (same model files) are kept: a plan
  // uses only a table of its own setup.
  const std::string out = o.out.empty() ? calibration_write_path(target.path(), draft.path()) : o.out;
  json previous;
  if (std::ifstream old_in(out); old_in) {
    previous = json::parse(old_in, nullptr, false);
    if (previous.is_discarded() || !previous.is_object() ||
        !calibration_describes_file(previous.value("target", json()), target.path()) ||
        !calibration_describes_file(previous.value("draft", json()), draft.path())) {
      previous = json();
    }
  }
  store_calibration_timings(j, calibration_timings_json(t, timing_setup_of(target, o.threads),
                                                        static_cast<int>(timing_ctx.size()), o.reps, disorder),
                            previous);
  // What the budget choice makes of it (informational; recomputed at run time).
  const SequoiaPlanner planner(a, std::min(kCalibrationMaxAutoNodes, target.max_batch() - 1), kCalibrationMaxAutoNodes);
  if (t.valid()) {
    const auto paths = try_rank_path_model(rank_paths, o.ranks, kRankPathMaxDepth);
    const BudgetChoice c = choose_budget(planner, t, planner.max_nodes(), planner.max_depth(), paths.get());
    j["auto_choice"] = {{"tree", c.node_budget == 0 ? "none" : tree_mode_name(c.mode)},
                        {"node_budget", c.node_budget}, {"depth", c.depth},
                        {"expected_tokens", c.expected_tokens}, {"step_ms", c.step_ms},
                        {"ms_per_token", c.ms_per_token()}};
  }
  write_calibration_file(out, j);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.json) {
    print_calibration_json(j, out, secs);
  } else {
    std::printf("calibration written to %s (%d prompts, %lld positions, %.1f s)\na[r] =", out.c_str(), used,
                static_cast<long long>(counts.positions()), secs);
    for (double x : a) std::printf(" %.4f", x);
    std::printf("  (miss %.4f)\n", static_cast<double>(counts.misses) / static_cast<double>(counts.positions()));
    std::printf("t_draft(w) ms:");
    for (size_t i = 0; i < t.draft_widths.size(); ++i) std::printf(" %d:%.2f", t.draft_widths[i], t.draft_ms[i]);
    std::printf("\nt_verify(N) ms:");
    for (size_t i = 0; i < t.verify_nodes.size(); ++i) std::printf(" %d:%.2f", t.verify_nodes[i], t.verify_ms[i]);
    std::printf("\n");
    if (j.contains("auto_choice")) std::printf("auto choice: %s\n", j["auto_choice"].dump().c_str());
  }
  return 0;
}

namespace {

// The --json description of a plan ("tree_plan").
json plan_json(const std::string& requested, const TreePlan& p) {
  const TreeBudget b = p.spec.effective_budget();
  json j{{"requested", requested},
         {"calibration", p.calibration_found ? json(p.calibration_path) : json(nullptr)},
         {"acceptance_source", p.acceptance_source.empty() ? std::string("none") : p.acceptance_source},
         {"accept_by_rank", p.accept_by_rank},
         {"acceptance_model", p.acceptance_model.empty() ? std::string("none") : p.acceptance_model},
         {"tree", p.speculative() ? tree_mode_name(b.mode) : "none"},
         {"node_budget", p.speculative() ? b.node_budget : 0},
         {"depth", p.speculative() ? b.depth : 0},
         {"expected_tokens", p.expected_tokens()}};
  if (p.speculative() && b.mode == TreeMode::optimal) {
    j["shape_nodes"] = p.shape.size();
    j["shape_parent"] = p.shape.parent;
    j["shape_rank"] = p.shape.rank;
  }
  if (!p.timings_source.empty()) {
    j["timings_source"] = p.timings_source;
    j["step_ms"] = p.choice.step_ms;
    j["ms_per_token"] = p.choice.ms_per_token();
    j["baseline_ms_per_token"] = p.baseline_ms_per_token;
  }
  return j;
}

}  // namespace

json plan_tree(const CommonOptions& o, ModelPair& pair, GenerateRequest& req, const FeatureDrafters& fd) {
  if (req.spec.draft_k <= 0) return nullptr;
  SpecSettings s = spec_settings(o);
  s.draft_k = req.spec.draft_k;
  RequestPlanner planner(pair, o.threads);
  planner.set_feature_drafters(fd);
  const TreePlan plan = planner.plan_tree(s, req.prompt);
  for (const std::string& w : plan.warnings) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
    pair.warnings.push_back(w);
  }
  req.spec = plan.spec;
  if (o.tree != "optimal" && o.tree != "auto") return nullptr;
  return plan_json(o.tree, plan);
}

}  // namespace specchat::cli
