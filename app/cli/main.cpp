// specchat-cli: the headless front end over the engine (generate, compare, chat, calibrate, bench,
// serve).
// Exit codes: 0 success, 1 a request/model error (printed, or as {"error": ...} with --json),
// 2 bad command line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/pipo.h"

#include "app/cli/bench.h"
#include "app/cli/calibrate.h"
#include "app/cli/chat.h"
#include "app/cli/feature_drafters.h"
#include "app/cli/options.h"
#include "app/cli/remote.h"
#include "app/cli/report.h"
#include "app/cli/serve.h"
#include "engine/model_pair.h"
#include "engine/runtime/request_planner.h"

using namespace specchat;
using nlohmann::json;

namespace {

struct Loaded {
  ModelPair pair;
  std::vector<int32_t> prompt;
  cli::CommonOptions o;  // the options, with the drafter an automatic draft choice settled on
};

Loaded load(const cli::CommonOptions& o, bool need_draft) {
  PairOptions po;
  po.target_path = o.model;
  po.n_ctx = o.n_ctx;
  po.n_threads = o.threads;
  cli::apply_backends(o, po);
  cli::apply_draft(o, need_draft, po);
  Loaded l{ModelPair::load(po), {}, o};
  cli::use_draft_choice(l.pair, l.o);
  for (const std::string& w : l.pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (o.chat_given) {
    std::vector<ChatMessage> msgs = o.messages;
    if (msgs.empty()) {
      if (!o.system.empty()) msgs.push_back({"system", o.system});
      msgs.push_back({"user", o.chat});
    }
    l.prompt = l.pair.encode_chat(msgs);
  } else {
    l.prompt = l.pair.encode_prompt(o.prompt);
  }
  return l;
}

// One run from a cold cache (Generator::clear_cache), so baseline and speculative start alike
// (no prefix reuse), with its total time (RequestPlanner's CompareRun::total_ms).
CompareRun run_one(Generator& g, const GenerateRequest& req, bool stream, GenerationResult* result) {
  g.clear_cache();
  TokenCallback cb;
  if (stream) {
    cb = [](const TokenEvent& e) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  *result = g.generate(req, cb, nullptr);
  CompareRun run;
  run.total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  run.tokens = result->tokens;
  run.stats = result->stats;
  return run;
}

// The --json "draft_choice" field: which drafter ran and why.
json draft_choice_json(const ModelPair& p, const cli::CommonOptions& o) {
  json j;
  const bool model = p.draft != nullptr;
  const bool feature = o.drafter == "block" || o.drafter == "mtp";
  j["drafter"] = feature ? json(o.drafter) : model ? "model" : o.drafter == "ngram" ? "ngram" : "none";
  j["path"] = model ? json(p.draft->path()) : json(nullptr);
  j["automatic"] = !p.draft_choice.reason.empty() && p.draft_choice.reason != "given";
  j["reason"] = p.draft_choice.reason;
  if (model && o.draft.empty() && o.model.empty()) {  // apply_draft filled in the bundled draft
    j["automatic"] = true;
    j["reason"] = "the bundled draft, paired with the bundled target";
  }
  return j;
}

int cmd_generate(const cli::CommonOptions& given) {
  if (!given.endpoint.empty()) return cli::cmd_generate_remote(given);
  if (!given.pipo.empty()) return cli::cmd_generate_pipo(given);
  Loaded l = load(given, given.draft_k > 0 && given.drafter == "model");
  const cli::CommonOptions& o = l.o;
  Generator g(*l.pair.target, l.pair.draft.get());
  const cli::FeatureDrafters fd = cli::install_feature_drafters(g.engine(), o);
  GenerateRequest req = cli::make_request(o, l.prompt, o.draft_k);
  const json plan = cli::plan_tree(o, l.pair, req, fd);
  const int k = req.spec.draft_k;
  GenerationResult r;
  run_one(g, req, !o.json, &r);
  if (o.json) {
    json j = cli::result_json(r, l.prompt, req, k > 0 ? "speculative" : "baseline");
    if (!plan.is_null()) j["tree_plan"] = plan;
    j["warnings"] = l.pair.warnings;
    j["draft_choice"] = draft_choice_json(l.pair, o);
    j["target_path"] = l.pair.target->path();
    j["memory"] = cli::memory_json(*l.pair.target, l.pair.draft.get());
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n\n" << cli::stats_line(r.stats, req.spec) << "\n";
    if (r.finish == FinishReason::context_full) {
      std::cout.flush();
      std::fprintf(stderr, "note: the reply stopped at the end of the context (%d tokens; --ctx sets it)\n",
                   l.pair.target->n_ctx());
    }
  }
  return 0;
}

int cmd_compare(const cli::CommonOptions& given) {
  if (!given.pipo.empty()) return cli::cmd_compare_pipo(given);
  if (!given.endpoint.empty() || !given.baseline_endpoint.empty()) return cli::cmd_compare_remote(given);
  Loaded l = load(given, given.drafter == "model");
  const cli::CommonOptions& o = l.o;
  Generator g(*l.pair.target, l.pair.draft.get());
  const cli::FeatureDrafters fd = cli::install_feature_drafters(g.engine(), o);
  const GenerateRequest base_req = cli::make_request(o, l.prompt, 0);
  GenerateRequest spec_req = cli::make_request(o, l.prompt, o.draft_k);
  const json plan = cli::plan_tree(o, l.pair, spec_req, fd);
  GenerationResult base, spec;
  g.warm_up(spec_req);  // neither side pays the cold start alone
  const CompareRun base_run = run_one(g, base_req, false, &base);
  const CompareRun spec_run = run_one(g, spec_req, false, &spec);
  const CompareOutcome c = RequestPlanner::compare(base_run, spec_run);
  if (o.json) {
    json j;
    j["baseline"] = cli::result_json(base, l.prompt, base_req, "baseline");
    j["speculative"] = cli::result_json(spec, l.prompt, spec_req, "speculative");
    j["baseline"]["total_ms"] = base_run.total_ms;
    j["speculative"]["total_ms"] = spec_run.total_ms;
    if (!plan.is_null()) j["speculative"]["tree_plan"] = plan;
    j["identical"] = c.identical;
    j["first_difference"] = c.identical ? json(nullptr) : json(c.first_diff);
    // 0 means not measurable (a side generated nothing): null, not a slowdown to nothing.
    j["speedup_decode"] = c.speedup_decode > 0 ? json(c.speedup_decode) : json(nullptr);
    j["total_time_ratio"] = c.total_time_ratio;
    j["warnings"] = l.pair.warnings;
    j["draft_choice"] = draft_choice_json(l.pair, o);
    j["target_path"] = l.pair.target->path();
    j["memory"] = cli::memory_json(*l.pair.target, l.pair.draft.get());
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "=== baseline ===\n" << base.text << "\n" << cli::stats_line(base.stats, base_req.spec) << "\n\n";
    std::cout << "=== speculative ===\n" << spec.text << "\n" << cli::stats_line(spec.stats, spec_req.spec) << "\n\n";
    char speedup[64];
    if (c.speedup_decode > 0) std::snprintf(speedup, sizeof speedup, "%.2fx", c.speedup_decode);
    else std::snprintf(speedup, sizeof speedup, "n/a (nothing generated)");
    std::printf("speedup_decode %s (decode tokens/s, speculative / baseline); total_time_ratio %.2fx "
                "(baseline total time / speculative, prefill included); %s\n",
                speedup, c.total_time_ratio,
                c.identical ? "identical tokens" : ("first difference at token " + std::to_string(c.first_diff)).c_str());
  }
  return 0;
}

// Maps an exception to a stable error kind for --json.
json error_json(const std::exception& e) {
  std::string kind = "error";
  if (auto* g = dynamic_cast<const GgufError*>(&e)) kind = gguf_error_kind_name(g->kind());
  else if (auto* pe = dynamic_cast<const PipoError*>(&e)) kind = std::string("pipo_") + pipo_error_kind_name(pe->kind());
  else if (auto* ge = dynamic_cast<const GenerationError*>(&e)) kind = ge->kind();
  else if (dynamic_cast<const VocabError*>(&e)) {
    kind = std::string(e.what()).find("vocab_mismatch") != std::string::npos ? "vocab_mismatch" : "vocab_error";
  } else if (dynamic_cast<const BackendError*>(&e)) {
    kind = "backend_error";
  } else if (dynamic_cast<const ModelError*>(&e)) {
    kind = std::string(e.what()).rfind("no CUDA device", 0) == 0 ? "no_cuda_device" : "model_error";
  }
  return json{{"error", {{"kind", kind}, {"message", e.what()}}}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specchat-cli: lossless speculative decoding on the command line"};
  app.require_subcommand(1);
  cli::CommonOptions gen_o, cmp_o;
  CLI::App* gen = app.add_subcommand("generate", "generate text (speculative when a draft is set)");
  cli::add_common_options(*gen, gen_o);
  cli::add_remote_options(*gen, gen_o);
  CLI::App* cmp = app.add_subcommand("compare", "baseline then speculative on the same prompt");
  cli::add_common_options(*cmp, cmp_o);
  cli::add_remote_options(*cmp, cmp_o, true);
  cli::CalibrateOptions cal_o;
  CLI::App* cal = app.add_subcommand("calibrate", "measure the draft's acceptance by rank and forward timings");
  cli::add_calibrate_options(*cal, cal_o);
  cli::CommonOptions chat_o;
  CLI::App* chat = app.add_subcommand("chat", "interactive multi-turn chat on the terminal");
  cli::add_common_options(*chat, chat_o);
  cli::BenchOptions bench_o;
  CLI::App* bench = app.add_subcommand("bench", "tau and tokens/s against node budget: chains, trees, n-gram");
  cli::add_bench_options(*bench, bench_o);
  cli::ServeOptions serve_o;
  CLI::App* srv = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat/completions, streaming, metrics)");
  cli::add_serve_options(*srv, serve_o);
  cli::BenchDiffOptions bdiff_o;
  CLI::App* bdiff = app.add_subcommand("bench-diff", "per-category changes between two bench reports, with significance");
  cli::add_bench_diff_options(*bdiff, bdiff_o);
  cli::BenchSuiteGenOptions bgen_o;
  CLI::App* bgen = app.add_subcommand("bench-suite", "generate the throughput suite (input-length buckets x entropy tiers)");
  cli::add_bench_suite_gen_options(*bgen, bgen_o);
  // CLI11 reads an unknown first word as a stray positional and says only "A subcommand is
  // required": name it and the subcommands there are.
  if (argc > 1 && argv[1][0] != '-') {
    const CLI::App& all = app;
    std::string names;
    bool known = false;
    for (const CLI::App* s : all.get_subcommands([](const CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + s->get_name();
      known = known || s->check_name(argv[1]);
    }
    if (!known) {
      std::fprintf(stderr, "error: unknown subcommand '%s' (the subcommands: %s; --help tells what each does)\n", argv[1],
                   names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (cal->parsed()) {
    if (const std::string why = cli::refused_calibrate_combination(*cal, cal_o); !why.empty()) {
      std::fprintf(stderr, "error: %s\n", why.c_str());
      return 2;
    }
    if (cal->count("--out") > 0 && cal_o.out.empty()) {
      std::fprintf(stderr, "error: --out needs a file name (leave it out for the file beside the drafter)\n");
      return 2;
    }
    try {
      return cli::cmd_calibrate(cal_o);
    } catch (const std::exception& e) {
      if (cal_o.json) std::cout << error_json(e).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      else std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (bench->parsed()) {
    // Options of one bench mode given to the other: refused, not silently ignored.
    const bool suite = !bench_o.suite.empty();
    for (const char* f : {"--max-prompts", "--prompts", "--budgets", "--chain-k"}) {
      if (suite && bench->count(f) > 0) {
        std::fprintf(stderr, "error: %s does not apply to --suite (the suite names its prompts and --configs its "
                     "configurations; --per-group N keeps the first N prompts of each group)\n", f);
        return 2;
      }
    }
    if (suite && bench->count("--out") > 0) {
      std::fprintf(stderr, "error: --out does not apply to --suite (--report DIR writes the suite's report.json, "
                   "per_request.csv, summary.csv and report.html)\n");
      return 2;
    }
    for (const char* f : {"--per-group", "--configs", "--repeat", "--report", "--pipo", "--pipo-fidelity", "--max-time",
                          "--bootstrap-seed", "--endpoint", "--api-key", "--remote-model"}) {
      if (!suite && bench->count(f) > 0) {
        std::fprintf(stderr, "error: %s needs --suite\n", f);
        return 2;
      }
    }
    if (bench->count("--profile-k") > 0 && !bench_o.profile) {
      std::fprintf(stderr, "error: --profile-k needs --profile\n");
      return 2;
    }
    if (const std::string why = cli::refused_bench_combination(*bench, bench_o); !why.empty()) {
      std::fprintf(stderr, "error: %s\n", why.c_str());
      return 2;
    }
    try {
      return cli::cmd_bench(bench_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (srv->parsed()) {
    try {
      return cli::cmd_serve(serve_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (bdiff->parsed() || bgen->parsed()) {
    try {
      return bdiff->parsed() ? cli::cmd_bench_diff(bdiff_o) : cli::cmd_bench_suite_gen(bgen_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (chat->parsed()) {
    // The conversation comes from stdin, one line a turn: the one-shot prompt options and --json
    // have nothing to apply to.
    for (const char* f : {"--prompt", "--chat", "--messages", "--json"}) {
      if (chat->count(f) > 0) {
        std::fprintf(stderr, "error: %s does not apply to chat (type the messages, one per line)\n", f);
        return 2;
      }
    }
    if (const std::string why = cli::refused_combination(*chat, chat_o); !why.empty()) {
      std::fprintf(stderr, "error: %s\n", why.c_str());
      return 2;
    }
    if (chat_o.draft == "ngram") chat_o.drafter = "ngram";
    if (chat_o.draft == "none") chat_o.drafter = "none";
    try {
      return chat_o.pipo.empty() ? cli::cmd_chat(chat_o) : cli::cmd_chat_pipo(chat_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  cli::CommonOptions& o = gen->parsed() ? gen_o : cmp_o;
  CLI::App* sub = gen->parsed() ? gen : cmp;
  if (const std::string why = cli::refused_combination(*sub, o); !why.empty()) {
    std::fprintf(stderr, "error: %s\n", why.c_str());
    return 2;
  }
  // `--draft ngram` / `--draft none` name a drafter rather than a file (FAULT-KINDS usage).
  if (o.draft == "ngram") o.drafter = "ngram";
  if (o.draft == "none") o.drafter = "none";
  if (!o.endpoint.empty() || !o.baseline_endpoint.empty()) {  // what a speculative request sends
    json spec = json::object();
    if (sub->count("--drafter") > 0 || o.draft == "ngram") spec["drafter"] = o.drafter;
    if (sub->count("--draft-k") > 0) spec["draft_k"] = o.draft_k;
    if (sub->count("--tree") > 0) spec["tree"] = o.tree;
    if (sub->count("--node-budget") > 0) spec["node_budget"] = o.node_budget;
    if (!spec.empty()) o.remote_spec = spec;
  }
  // PIPO's own flags mean nothing without --pipo, and PIPO runs locally only: refused, not ignored.
  if (o.pipo.empty() && (sub->count("--pipo-threshold") > 0 || sub->count("--pipo-fidelity") > 0)) {
    std::fprintf(stderr, "error: --pipo-threshold and --pipo-fidelity need --pipo (the approximate PIPO mode)\n");
    return 2;
  }
  if (!o.pipo.empty() && (!o.endpoint.empty() || !o.baseline_endpoint.empty())) {
    std::fprintf(stderr, "error: --pipo runs on this machine's engine; it cannot be combined with --endpoint\n");
    return 2;
  }
  o.chat_given = sub->count("--chat") > 0 || sub->count("--messages") > 0;
  o.prompt_given = sub->count("--prompt") > 0;
  if (!o.chat_given && !o.prompt_given) {
    std::fprintf(stderr, "error: one of --prompt, --chat or --messages is required\n");
    return 2;
  }
  try {
    if (!o.messages_file.empty()) o.messages = cli::read_messages_file(o.messages_file);
    return gen->parsed() ? cmd_generate(o) : cmd_compare(o);
  } catch (const std::exception& e) {
    if (o.json) {
      std::cout << error_json(e).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      std::fprintf(stderr, "error: %s\n", e.what());
    }
    return 1;
  }
}
