#include "app/cli/calibrate.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "engine/model.h"
#include "engine/speculative/calibration.h"
#include "engine/speculative/calibration_file.h"
#include "engine/speculative/sequoia.h"

namespace specchat::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kVersion = 1;
constexpr const char* kBackend = "cpu";
// Verification sizes and draft widths timed (issue 3); the budget search stays within them.
const std::vector<int> kVerifyNodes = {0, 1, 2, 4, 8, 16, 32, 64};
const std::vector<int> kDraftWidths = {1, 2, 4, 8, 16};
constexpr int kMaxAutoNodes = 64;
constexpr int kTimingContext = 64;  // tokens of real context the timings run on

// engine/speculative/calibration_file.h: shared with the desktop app.
std::string fingerprint(const std::string& path) { return file_fingerprint(path); }

json file_info(const std::string& path) {
  return json{{"file", fs::path(path).filename().string()},
              {"size", static_cast<uint64_t>(fs::file_size(path))},
              {"fingerprint", fingerprint(path)}};
}

bool same_file(const json& stored, const json& now) {
  return stored.is_object() && stored.value("size", uint64_t{0}) == now.at("size").get<uint64_t>() &&
         stored.value("fingerprint", std::string()) == now.at("fingerprint").get<std::string>();
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  json j = json::parse(in, nullptr, false);
  return j.is_discarded() || !j.is_object() ? json(nullptr) : j;
}

// Writes through a temporary file and a rename, so readers never see half a file.
void write_json_file(const std::string& path, const json& j) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, path);
}

json timings_json(const StepTimings& t, int threads, int context_tokens, int reps) {
  return json{{"backend", kBackend},       {"threads", threads},
              {"context_tokens", context_tokens}, {"reps", reps},
              {"draft_widths", t.draft_widths}, {"draft_ms", t.draft_ms},
              {"verify_nodes", t.verify_nodes}, {"verify_ms", t.verify_ms}};
}

// Timings stored for this backend and thread count, or an invalid (empty) table.
StepTimings timings_from_json(const json& j, int threads) {
  StepTimings t;
  if (!j.is_object() || j.value("backend", std::string()) != kBackend || j.value("threads", -1) != threads) return t;
  try {
    t.draft_widths = j.at("draft_widths").get<std::vector<int>>();
    t.draft_ms = j.at("draft_ms").get<std::vector<double>>();
    t.verify_nodes = j.at("verify_nodes").get<std::vector<int>>();
    t.verify_ms = j.at("verify_ms").get<std::vector<double>>();
  } catch (const json::exception&) {
    return {};
  }
  return t.valid() ? t : StepTimings{};
}

std::string find_prompts_file(const std::string& given) {
  if (!given.empty()) return given;
  const std::string rel = "tests/data/heldout_prompts.json";
  if (fs::exists(rel)) return rel;
  const fs::path beside_models = fs::path(bundled_models_dir()) / ".." / ".." / rel;
  if (fs::exists(beside_models)) return beside_models.lexically_normal().string();
  throw std::runtime_error("no held-out prompts found (tried " + rel + "); pass --prompts FILE");
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

// A real context for timings: kTimingContext tokens of `ctx` (all of it when shorter), leaving
// room in the context for the largest verification.
std::vector<int32_t> timing_context(const std::vector<int32_t>& ctx, int n_ctx) {
  const int room = std::max(1, n_ctx - (kVerifyNodes.back() + 1));
  const size_t len = static_cast<size_t>(std::min<int>({static_cast<int>(ctx.size()), kTimingContext, room}));
  return std::vector<int32_t>(ctx.end() - static_cast<std::ptrdiff_t>(len), ctx.end());
}

void warn(ModelPair& pair, const std::string& w) {
  std::fprintf(stderr, "warning: %s\n", w.c_str());
  pair.warnings.push_back(w);
}

}  // namespace

std::string calibration_path(const std::string& draft_path) { return specchat::calibration_path(draft_path); }

std::vector<double> fallback_accept_by_rank() {
  std::vector<double> a;
  for (int r = 0; r < 8; ++r) a.push_back(0.5 * std::pow(0.5, r));
  return a;
}

void add_calibrate_options(CLI::App& cmd, CalibrateOptions& o) {
  cmd.add_option("--model,-m", o.model, "target model GGUF (default: the bundled target)");
  cmd.add_option("--draft,-d", o.draft, "draft model GGUF or 'bundled' (default)");
  cmd.add_option("--prompts", o.prompts, "held-out prompts JSON (default: tests/data/heldout_prompts.json)");
  cmd.add_option("--out,-o", o.out, "calibration file (default: <draft without .gguf>.calibration.json)");
  cmd.add_option("-n,--max-tokens", o.n, "target tokens generated per prompt")->check(CLI::Range(1, 4096));
  cmd.add_option("--ranks", o.ranks, "draft ranks counted (rank >= this is a miss)")->check(CLI::Range(1, 64));
  cmd.add_option("--max-prompts", o.max_prompts, "use at most this many prompts (0 = all)")->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--reps", o.reps, "timed forwards per measurement (median)")->check(CLI::Range(1, 100));
  cmd.add_option("--threads", o.threads, "BLAS threads (0 = all cores)")->check(CLI::Range(0, 256));
  cmd.add_flag("--json", o.json, "print the calibration as JSON");
}

int cmd_calibrate(const CalibrateOptions& o) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (o.draft == "ngram" || o.draft == "none") {
    throw std::runtime_error("calibrate needs a draft model (a GGUF file or 'bundled'), not '" + o.draft + "'");
  }
  PairOptions po;
  po.target_path = o.model;
  po.draft_path = o.draft == "bundled" || o.draft.empty() ? bundled_draft_path() : o.draft;
  po.n_threads = o.threads;
  ModelPair pair = ModelPair::load(po);
  for (const std::string& w : pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  LlamaModel& target = *pair.target;
  LlamaModel& draft = *pair.draft;
  const std::string prompts_path = find_prompts_file(o.prompts);
  const auto prompts = load_prompts(pair, prompts_path, o.max_prompts);

  // Acceptance by rank: the target decodes greedily; the draft ranks each chosen token.
  Generator gen(target, nullptr);
  RankCounts counts;
  counts.hits.assign(static_cast<size_t>(o.ranks), 0);
  std::vector<int32_t> timing_ctx;
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
    count_draft_ranks(draft, ctx, static_cast<int>(prompt.size()), counts);
    if (timing_ctx.size() < static_cast<size_t>(kTimingContext) && ctx.size() > timing_ctx.size()) {
      timing_ctx = timing_context(ctx, target.n_ctx());
    }
    ++used;
  }
  if (counts.positions() == 0) throw std::runtime_error("calibration: no prompt produced a token");
  target.kv().truncate(0);
  const StepTimings t = measure_step_timings(target, &draft, timing_ctx, kVerifyNodes, kDraftWidths, o.reps);
  const std::vector<double> a = counts.accept_by_rank();

  json j;
  j["version"] = kVersion;
  j["date"] = utc_now();
  j["backend"] = kBackend;
  j["target"] = file_info(target.path());
  j["draft"] = file_info(draft.path());
  j["acceptance"] = {{"ranks", o.ranks},           {"accept_by_rank", a},
                     {"hits", counts.hits},         {"misses", counts.misses},
                     {"positions", counts.positions()}, {"prompts", used},
                     {"prompts_file", fs::path(prompts_path).filename().string()}, {"n", o.n}};
  j["timings"] = timings_json(t, o.threads, static_cast<int>(timing_ctx.size()), o.reps);
  // What the budget choice makes of it (informational; recomputed at run time).
  const SequoiaPlanner planner(a, std::min(kMaxAutoNodes, target.max_batch() - 1), kMaxAutoNodes);
  if (t.valid()) {
    const BudgetChoice c = choose_budget(planner, t, planner.max_nodes(), planner.max_depth());
    j["auto_choice"] = {{"tree", c.node_budget == 0 ? "none" : tree_mode_name(c.mode)},
                        {"node_budget", c.node_budget}, {"depth", c.depth},
                        {"expected_tokens", c.expected_tokens}, {"step_ms", c.step_ms},
                        {"ms_per_token", c.ms_per_token()}};
  }
  const std::string out = o.out.empty() ? calibration_path(draft.path()) : o.out;
  write_json_file(out, j);
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.json) {
    json shown = j;
    shown["path"] = out;
    shown["seconds"] = secs;
    std::cout << shown.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
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

json plan_tree(const CommonOptions& o, ModelPair& pair, GenerateRequest& req) {
  if ((o.tree != "optimal" && o.tree != "auto") || req.spec.draft_k <= 0) return nullptr;
  if (req.spec.drafter != DrafterKind::model || !pair.draft) {
    if (o.tree == "auto") {
      // The n-gram drafter has no calibration: its tries within the given budget.
      warn(pair, "--tree auto needs the model drafter's calibration; using --node-budget/--depth with the " +
                     std::string(drafter_kind_name(req.spec.drafter)) + " drafter's tree");
      req.spec.tree.mode = TreeMode::dynamic;
    }
    return nullptr;
  }
  LlamaModel& target = *pair.target;
  LlamaModel& draft = *pair.draft;
  const std::string cal_path = calibration_path(draft.path());
  json cal = read_json_file(cal_path);
  const json target_now = file_info(target.path()), draft_now = file_info(draft.path());
  bool matches = false;
  if (cal.is_null()) {
    warn(pair, "no calibration at " + cal_path + " (run `specchat-cli calibrate`); using a[r] = 0.5^(r+1)");
  } else if (!same_file(cal.value("target", json()), target_now) || !same_file(cal.value("draft", json()), draft_now)) {
    warn(pair, "calibration " + cal_path + " was made for other model files (re-run `specchat-cli calibrate`); "
               "using a[r] = 0.5^(r+1)");
  } else {
    matches = true;
  }
  std::vector<double> a;
  std::string a_source = "fallback";
  if (matches && cal.contains("acceptance")) {
    try {
      a = cal.at("acceptance").at("accept_by_rank").get<std::vector<double>>();
      a_source = "calibration";
    } catch (const json::exception&) {
      a.clear();
    }
  }
  if (a_source == "fallback") {
    if (matches) warn(pair, "calibration " + cal_path + " has no acceptance vector; using a[r] = 0.5^(r+1)");
    a = fallback_accept_by_rank();
  }
  json plan{{"requested", o.tree}, {"calibration", cal.is_null() ? json(nullptr) : json(cal_path)},
            {"acceptance_source", a_source}, {"accept_by_rank", a}};

  if (o.tree == "optimal") {
    const TreeShape s = sequoia_tree(a, req.spec.tree.node_budget, req.spec.tree.depth);
    req.spec.tree.mode = TreeMode::optimal;
    req.spec.tree.shape_parent = s.parent;
    req.spec.tree.shape_rank = s.rank;
    plan["tree"] = "optimal";
    plan["node_budget"] = req.spec.tree.node_budget;
    plan["depth"] = req.spec.tree.depth;
    plan["shape_nodes"] = s.size();
    plan["shape_parent"] = s.parent;
    plan["shape_rank"] = s.rank;
    plan["expected_tokens"] = s.expected_tokens;
    return plan;
  }

  // auto: timings from the calibration (this backend and thread count), else measured now on
  // the request's prompt and cached beside the draft.
  StepTimings t = matches ? timings_from_json(cal.value("timings", json()), o.threads) : StepTimings{};
  std::string t_source = "calibration";
  if (!t.valid()) {
    t_source = "measured";
    const auto ctx = timing_context(req.prompt, target.n_ctx());
    constexpr int kReps = 3;
    t = measure_step_timings(target, &draft, ctx, kVerifyNodes, kDraftWidths, kReps);
    if (!t.valid()) throw std::runtime_error("--tree auto: could not time the models on this context");
    if (cal.is_null() || matches) {
      json updated = cal.is_null() ? json{{"version", kVersion}, {"backend", kBackend}} : cal;
      updated["date"] = utc_now();
      updated["target"] = target_now;
      updated["draft"] = draft_now;
      updated["timings"] = timings_json(t, o.threads, static_cast<int>(ctx.size()), kReps);
      try {
        write_json_file(cal_path, updated);
      } catch (const std::exception& e) {
        warn(pair, std::string("could not cache the timings: ") + e.what());
      }
    }
  }
  const int max_nodes = std::min({kMaxAutoNodes, target.max_batch() - 1, t.verify_nodes.back()});
  const SequoiaPlanner planner(a, max_nodes, max_nodes);
  const BudgetChoice c = choose_budget(planner, t, max_nodes, max_nodes);
  if (c.node_budget == 0) {
    req.spec.draft_k = 0;  // drafting does not pay on these numbers: plain decoding
  } else if (c.mode == TreeMode::chain) {
    req.spec.tree.mode = TreeMode::chain;
    req.spec.draft_k = c.node_budget;
  } else {
    req.spec.tree.mode = TreeMode::optimal;
    req.spec.tree.node_budget = c.node_budget;
    req.spec.tree.depth = c.depth;
    req.spec.tree.shape_parent = c.shape.parent;
    req.spec.tree.shape_rank = c.shape.rank;
  }
  plan["timings_source"] = t_source;
  plan["tree"] = c.node_budget == 0 ? "none" : tree_mode_name(c.mode);
  plan["node_budget"] = c.node_budget;
  plan["depth"] = c.depth;
  plan["expected_tokens"] = c.expected_tokens;
  plan["step_ms"] = c.step_ms;
  plan["ms_per_token"] = c.ms_per_token();
  plan["baseline_ms_per_token"] = t.t_verify(0);
  return plan;
}

}  // namespace specchat::cli
