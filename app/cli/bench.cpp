#include "app/cli/bench.h"
#include "app/cli/report.h"
#include "app/cli/data_files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/calibrate.h"
#include "engine/drafters/install.h"
#include "engine/model_pair.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/run_totals.h"

namespace specchat::cli {

using nlohmann::json;

void add_bench_options(CLI::App& cmd, BenchOptions& o) {
  CommonOptions& c = o.common;
  cmd.add_option("--model,-m", c.model, "target model GGUF (default: the bundled target)");
  cmd.add_option("--draft,-d", c.draft, "draft model GGUF or 'bundled' (default)");
  cmd.add_option("-n,--max-tokens", c.n, "tokens generated per prompt")->check(CLI::Range(1, 4096));
  cmd.add_option("--threads", c.threads, "CPU threads of the engine's pool (0 = all cores; more than the cores is capped)")->check(CLI::Range(0, 256));
  add_engine_options(cmd, c);
  cmd.add_option("--prompts", o.prompts, "held-out prompts JSON (default tests/data/heldout_prompts.json)");
  cmd.add_option("--max-prompts", o.max_prompts, "prompts used (story and chat prompts alternate)")
      ->check(CLI::Range(1, 10000));
  cmd.add_option("--budgets", o.budgets, "node budgets for the tree configurations")
      ->delimiter(',')
      ->check(CLI::Range(1, 127));
  cmd.add_option("--chain-k", o.chain_ks, "draft lengths for the chain configurations")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd.add_option("--out", o.out, "write the full report as JSON here");
  cmd.add_option("--concurrency", o.concurrency_list,
                 "with --suite: concurrency levels, e.g. 1,2,4,8; without: decode this many prompts at once "
                 "(one Engine, batched verification) against one at a time")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd.add_option("--suite", o.suite,
                 "prompt suite JSON (resources/bench/README.md), or 'qualitative' / 'throughput' for the bundled ones");
  cmd.add_option("--configs", o.configs,
                 "with --suite: baseline,chain:k=4,dynamic:n=16:d=5:b=3,optimal:n=16:d=6,ngram:k=4 ...");
  cmd.add_option("--repeat", o.repeat, "with --suite: repetitions of the whole sweep")->check(CLI::Range(1, 1000));
  cmd.add_option("--max-time", o.max_time, "with --suite: start no new wave after this many seconds (0 = no limit)")
      ->check(kFinite)
      ->check(CLI::Range(0.0, 1e7));
  cmd.add_option("--per-group", o.per_group,
                 "with --suite: only the first N prompts of each category (or tier x bucket)")
      ->check(CLI::Range(1, 100000));
  cmd.add_option("--report", o.report,
                 "with --suite: write report.json, per_request.csv, summary.csv and report.html into this directory");
  cmd.add_option("--bootstrap-seed", o.bootstrap_seed, "with --suite: seed of the bootstrap confidence intervals");
  cmd.add_option("--endpoint", o.common.endpoint,
                 "with --suite: run the requests on this OpenAI-compatible server (http://host:port[/v1]) instead of "
                 "the local engine; the configurations become our server's request parameters");
  cmd.add_option("--api-key", o.common.api_key, "the endpoint's API key (default: $SPECCHAT_API_KEY)");
  cmd.add_option("--remote-model", o.common.model_name, "the model name sent to the endpoint");
  cmd.add_option("--pipo", o.common.pipo,
                 "with --suite: the PIPO release the pipo:t=X configurations run (default: the bundled one); "
                 "APPROXIMATE, reported as such");
  cmd.add_option("--pipo-fidelity", o.common.pipo_fidelity,
                 "with --suite: PIPO fidelity gauge, the KL of token 1 against a plain copy of --model on one step in "
                 "N of the pipo configurations (its time is left out of theirs; 0 = off)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_flag("--profile", o.profile,
               "time split per operation (matmul by shape, attention, norms, sampling, overhead) of decode and of "
               "verification; --max-prompts prompts (at most 12), -n tokens each");
  cmd.add_option("--profile-k", o.profile_k, "with --profile: the draft-model chain whose verification is profiled")
      ->check(CLI::Range(1, 64));
  cmd.add_flag("--verify-cost", o.verify_cost,
               "time target forwards of 1..64 rows (verification batches) against one row; --max-prompts = repetitions");
}

namespace {

struct Config {
  std::string name;       // e.g. "dynamic N=16"
  std::string family;     // baseline, chain, dynamic, optimal, ngram
  int budget = 0;
  GenerateRequest req;    // prompt filled per run
};


}  // namespace

std::vector<std::pair<std::string, std::string>> load_bench_prompts(const std::string& path, int max_prompts) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open prompts file " + path);
  std::vector<std::pair<std::string, std::string>> text, chat, out;
  try {
    const json j = json::parse(in);
    for (const auto& p : j.at("prompts")) {
      const std::string kind = p.at("kind").get<std::string>();
      if (kind != "chat" && kind != "text") throw std::runtime_error("a prompt's kind is \"" + kind + "\" (text or chat)");
      (kind == "chat" ? chat : text).emplace_back(kind, p.at("text").get<std::string>());
    }
  } catch (const std::exception& e) {
    // The JSON library's messages name neither the file nor the expected layout.
    throw std::runtime_error("prompts file " + path + ": " + e.what() +
                             " (expected {\"prompts\": [{\"kind\": \"text\" or \"chat\", \"text\": \"...\"}, ...]})");
  }
  for (size_t i = 0; static_cast<int>(out.size()) < max_prompts && (i < text.size() || i < chat.size()); ++i) {
    if (i < text.size()) out.push_back(text[i]);
    if (i < chat.size() && static_cast<int>(out.size()) < max_prompts) out.push_back(chat[i]);
  }
  return out;
}

std::string refused_bench_combination(const CLI::App& bench, const BenchOptions& o) {
  const auto given = [&](const char* flag) {
    const CLI::Option* opt = bench.get_option_no_throw(flag);
    return opt != nullptr && opt->count() > 0;
  };
  if (!o.suite.empty() && (o.profile || o.verify_cost)) return "--suite cannot be combined with --profile or --verify-cost";
  if (!o.suite.empty()) return {};
  if (!o.common.endpoint.empty()) return "bench --endpoint needs --suite (the SPEED-Bench-style sweep)";
  if (o.concurrency_list.size() > 1) return "several --concurrency levels need --suite";
  const bool concurrency = !o.concurrency_list.empty() && o.concurrency_list.front() > 0;
  if (o.profile && (o.verify_cost || concurrency)) {
    return "bench --profile cannot be combined with --verify-cost or --concurrency";
  }
  // The variants of the default run (--budgets, --chain-k) and its draft model, in other modes.
  const char* mode = o.profile ? "--profile" : o.verify_cost ? "--verify-cost" : nullptr;
  if (mode) {
    for (const char* f : {"--budgets", "--chain-k"}) {
      if (given(f)) {
        return std::string(f) + " does not apply to " + mode + " (" +
               (o.profile ? "--profile-k sets the chain profiled" : "it times its own row counts") + ")";
      }
    }
  }
  if (o.verify_cost && given("--draft")) return "--draft does not apply to --verify-cost (it times the target alone)";
  if (given("--out") && o.out.empty()) return "--out needs a file name (leave it out for no report file)";
  if (o.verify_cost && given("--prompts")) {
    return "--prompts does not apply to --verify-cost (it times forwards after a fixed prefix of up to 256 tokens)";
  }
  if (concurrency && given("--budgets")) return "--budgets does not apply to --concurrency (it runs chains of --chain-k)";
  if (!mode && !concurrency && given("--budgets") && (o.common.draft == "none" || o.common.draft == "ngram")) {
    return "--budgets sizes the draft model's trees, which --draft " + o.common.draft + " leaves out";
  }
  return {};
}

// Fails before any measuring when the report cannot be written to `path` (a folder, a missing
// or read-only folder, a read-only file): the report is written only after the whole run.
void check_report_output(const std::string& path) {
  namespace fs = std::filesystem;
  const auto refuse = [&](const std::string& why) { throw std::runtime_error("cannot write the report to " + path + ": " + why); };
  std::error_code ec;
  if (fs::is_directory(path, ec)) refuse("it is a folder (give a file name)");
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) refuse("the folder " + dir.string() + " does not exist");
  const bool existed = fs::exists(path, ec);
  if (!std::ofstream(path, std::ios::app)) refuse(existed ? "the file is not writable" : "it cannot be created there");
  if (!existed) fs::remove(path, ec);
}

int cmd_bench(BenchOptions& o) {
  if (!o.out.empty()) check_report_output(o.out);
  if (!o.suite.empty()) return cmd_bench_suite(o);
  if (!o.concurrency_list.empty()) o.concurrency = o.concurrency_list.front();
  if (o.verify_cost) return cmd_bench_verify(o);
  if (o.profile) return cmd_bench_profile(o);
  if (o.concurrency > 0) return cmd_bench_concurrency(o);
  CommonOptions& c = o.common;
  PairOptions po;
  po.target_path = c.model;
  apply_draft(c, true, po);  // --draft, the bundled draft, or one found beside --model
  po.n_threads = c.threads;
  po.kv_type = parse_kv_type(c.kv_type);
  po.activations = parse_activations(c.activations);
  ModelPair pair = ModelPair::load(po);
  const std::string prompts_path = o.prompts.empty() ? bundled_data_file("heldout_prompts.json") : o.prompts;
  const auto prompts = load_bench_prompts(prompts_path, o.max_prompts);

  auto make = [&](const std::string& family, int budget, const std::string& tree, int depth, int branch,
                  const std::string& drafter) {
    CommonOptions oc = c;
    oc.tree = tree;
    oc.node_budget = budget;
    oc.depth = depth;
    oc.branch = branch;
    oc.drafter = drafter;
    Config cfg;
    cfg.family = family;
    cfg.budget = budget;
    cfg.name = family == "baseline" ? "baseline" : family + " N=" + std::to_string(budget);
    cfg.req = make_request(oc, {}, family == "baseline" ? 0 : budget);
    if (tree == "optimal") {
      // The row names the tree that runs: a calibration can fill fewer nodes than asked for.
      plan_tree(oc, pair, cfg.req);
      const int ran = cfg.req.spec.draft_k > 0 ? cfg.req.spec.effective_budget().node_budget : 0;
      if (ran != budget) cfg.name += ran > 0 ? " (" + std::to_string(ran) + " run)" : " (none)";
    }
    return cfg;
  };
  std::vector<Config> cfgs;
  cfgs.push_back(make("baseline", 0, "chain", 1, 1, "none"));
  // Without a draft model (--draft none or ngram) its rows would be plain decoding under a
  // chain or tree label: left out.
  const bool model_rows = pair.draft != nullptr;
  if (!model_rows) {
    const std::string why = c.draft.empty() ? "none found for the target" : "--draft " + c.draft;
    std::fprintf(stderr, "note: no draft model (%s): the draft-model rows (chain, dynamic, optimal) are left out\n",
                 why.c_str());
  }
  if (model_rows) {
    for (int k : o.chain_ks) cfgs.push_back(make("chain", k, "chain", k, 1, "model"));
    for (int b : o.budgets) cfgs.push_back(make("dynamic", b, "dynamic", std::min(b, 6), b >= 16 ? 4 : 2, "model"));
    for (int b : o.budgets) cfgs.push_back(make("optimal", b, "optimal", std::min(b, 8), 1, "model"));
    // What `--tree auto` chooses for this pair and machine (timed on the first prompt when the
    // calibration and the timing cache have no table for this setup).
    if (!prompts.empty()) {
      CommonOptions oc = c;
      oc.tree = "auto";
      oc.drafter = "model";
      Config a;
      a.family = "auto";
      const auto& [kind, text] = prompts.front();
      a.req = make_request(oc, kind == "chat" ? pair.encode_chat({{"user", text}}) : pair.encode_prompt(text),
                           std::max(1, c.draft_k));
      const json plan = plan_tree(oc, pair, a.req);
      a.budget = a.req.spec.draft_k > 0 ? a.req.spec.effective_budget().node_budget : 0;
      a.name = "auto: " + (plan.is_object() ? plan.value("tree", std::string("none")) : std::string("none")) +
               " N=" + std::to_string(a.budget);
      cfgs.push_back(std::move(a));
    }
  }
  for (int b : {8, 16}) cfgs.push_back(make("ngram", b, b == 8 ? "chain" : "dynamic", 8, 3, "ngram"));
  // The drafters that read the target's hidden states, when files beside the target bind to it
  // (or --block-drafter / --mtp name them): block chains of the --chain-k lengths and of B − 1
  // tokens (B = 8, 16), block trees
  // from the marginals, MTP chains k = 1..4 and a small MTP tree.
  Generator g(*pair.target, pair.draft.get());
  FeatureDrafterRequest freq;
  freq.block = freq.mtp = true;
  freq.optional = c.block_drafter.empty() && c.mtp.empty();
  freq.block_path = c.block_drafter;
  freq.mtp_path = c.mtp;
  freq.n_threads = c.threads;
  const FeatureDrafters fd = install_feature_drafters(g.engine(), freq);
  if (fd.block_size > 0) {
    // Short chains too (the block is then only as wide as the chain is deep: BlockDrafter).
    for (int k : o.chain_ks) {
      if (k < 7) cfgs.push_back(make("block", k, "chain", k, 1, "block"));
    }
    for (int bs : {8, 16}) {
      if (bs > fd.block_size) continue;
      cfgs.push_back(make("block B=" + std::to_string(bs), bs - 1, "chain", bs - 1, 1, "block"));
      cfgs.push_back(make("block tree B=" + std::to_string(bs), bs == 8 ? 16 : 32, "dynamic", bs - 1, 3, "block"));
    }
  }
  if (fd.mtp) {
    for (int k = 1; k <= 4; ++k) cfgs.push_back(make("mtp", k, "chain", k, 1, "mtp"));
    cfgs.push_back(make("mtp tree", 12, "dynamic", 4, 3, "mtp"));
  }

  // Prompts that repeat their context (the n-gram drafter's case): a story opening twice and
  // then its first half again, so the continuation can copy from the context.
  std::vector<std::pair<std::string, std::string>> repeat_prompts;
  for (const auto& [kind, text] : prompts) {
    if (kind != "text") continue;
    repeat_prompts.emplace_back("text", text + "\n" + text + "\n" + text.substr(0, text.size() / 2));
  }
  std::vector<Config> rcfgs;
  rcfgs.push_back(make("baseline", 0, "chain", 1, 1, "none"));
  if (model_rows) rcfgs.push_back(make("chain", 4, "chain", 4, 1, "model"));
  for (int b : {8, 16}) rcfgs.push_back(make("ngram", b, b == 8 ? "chain" : "dynamic", 8, 3, "ngram"));
  for (Config& rc : rcfgs) rc.name = "repeat " + rc.name;

  bool all_identical = true;
  auto run_set = [&](const std::vector<std::pair<std::string, std::string>>& ps, const std::vector<Config>& cs) {
    std::vector<RunTotals> tot(cs.size());
    for (size_t pi = 0; pi < ps.size(); ++pi) {
      const auto& [kind, text] = ps[pi];
      const std::vector<int32_t> ids = kind == "chat" ? pair.encode_chat({{"user", text}}) : pair.encode_prompt(text);
      if (static_cast<int>(ids.size()) + c.n + 64 >= pair.target->n_ctx()) continue;  // leave room to draft
      std::vector<int32_t> base_tokens;
      for (size_t ci = 0; ci < cs.size(); ++ci) {
        GenerateRequest req = cs[ci].req;
        req.prompt = ids;
        g.clear_cache();  // every configuration starts cold
        const GenerationResult r = g.generate(req);
        if (ci == 0) base_tokens = r.tokens;
        const bool same = tot[ci].add(r, base_tokens);
        if (c.temp <= 0 && !same) all_identical = false;
      }
      std::fprintf(stderr, "\rprompt %zu/%zu", pi + 1, ps.size());
    }
    std::fprintf(stderr, "\n");
    return tot;
  };
  std::vector<RunTotals> tot = run_set(prompts, cfgs);
  const std::vector<RunTotals> rtot = run_set(repeat_prompts, rcfgs);
  json rows = json::array();
  std::printf("%-22s %7s %7s %8s %9s %8s %9s\n", "config", "tau", "alpha", "tok/s", "speedup", "drafted", "identical");
  auto print_rows = [&](const std::vector<Config>& cs, const std::vector<RunTotals>& ts) {
    const double base_tps = ts[0].tokens_per_s();
    for (size_t ci = 0; ci < cs.size(); ++ci) {
      const RunTotals& t = ts[ci];
      const double tau = t.tau(), alpha = t.alpha(), tps = t.tokens_per_s();
      const double speedup = base_tps > 0 ? tps / base_tps : 0;
      std::printf("%-22s %7.2f %7.3f %8.1f %8.2fx %8ld %5ld/%ld\n", cs[ci].name.c_str(), tau, alpha, tps, speedup,
                  t.drafted, t.identical, t.runs);
      rows.push_back({{"config", cs[ci].name}, {"family", cs[ci].family}, {"node_budget", cs[ci].budget},
                      {"tau", tau}, {"acceptance_rate", alpha}, {"tokens_per_s", tps}, {"speedup", speedup},
                      {"tokens", t.tokens}, {"steps", t.steps}, {"drafted", t.drafted}, {"accepted", t.accepted},
                      {"identical", t.identical}, {"runs", t.runs}});
    }
  };
  print_rows(cfgs, tot);
  print_rows(rcfgs, rtot);
  if (!o.out.empty()) {
    write_report_json(o.out, json{{"prompts", prompts.size()}, {"n", c.n},         {"temperature", c.temp},
                                  {"kv_type", c.kv_type},     {"activations", c.activations}, {"rows", rows}});
  }
  return all_identical ? 0 : 1;
}

}  // namespace specchat::cli
