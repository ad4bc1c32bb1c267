// specchat-cli: the headless front end over the engine (generate, compare, chat, calibrate, bench).
// Exit codes: 0 success, 1 a request/model error (printed, or as {"error": ...} with --json),
// 2 bad command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/cli/bench.h"
#include "app/cli/calibrate.h"
#include "app/cli/chat.h"
#include "app/cli/options.h"
#include "app/cli/report.h"
#include "engine/model_pair.h"

using namespace specchat;
using nlohmann::json;

namespace {

struct Loaded {
  ModelPair pair;
  std::vector<int32_t> prompt;
};

Loaded load(const cli::CommonOptions& o, bool need_draft) {
  PairOptions po;
  po.target_path = o.model;
  po.n_ctx = o.n_ctx;
  po.n_threads = o.threads;
  cli::apply_backends(o, po);
  if (need_draft && o.draft != "none") po.draft_path = o.draft == "bundled" ? bundled_draft_path() : o.draft;
  Loaded l{ModelPair::load(po), {}};
  for (const std::string& w : l.pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (o.chat_given) {
    std::vector<ChatMessage> msgs;
    if (!o.system.empty()) msgs.push_back({"system", o.system});
    msgs.push_back({"user", o.chat});
    l.prompt = l.pair.encode_chat(msgs);
  } else {
    l.prompt = l.pair.encode_prompt(o.prompt);
  }
  return l;
}

// Drafted tokens per step the request can use: 0 when the model drafter has no draft model.
int effective_k(const cli::CommonOptions& o, const ModelPair& p) {
  if (o.drafter == "none") return 0;
  if (o.drafter == "model" && !p.draft) return 0;
  return o.draft_k;
}

GenerationResult run_one(Generator& g, LlamaModel& target, LlamaModel* draft, const GenerateRequest& req,
                         bool stream) {
  // A fresh cache per run, so baseline and speculative start alike (no prefix reuse).
  target.kv().truncate(0);
  if (draft) draft->kv().truncate(0);
  TokenCallback cb;
  if (stream) {
    cb = [](const TokenEvent& e) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    };
  }
  return g.generate(req, cb, nullptr);
}

int cmd_generate(const cli::CommonOptions& o) {
  Loaded l = load(o, o.draft_k > 0 && o.drafter == "model");
  const int k = effective_k(o, l.pair);
  Generator g(*l.pair.target, l.pair.draft.get());
  GenerateRequest req = cli::make_request(o, l.prompt, k);
  const json plan = cli::plan_tree(o, l.pair, req);
  const GenerationResult r = run_one(g, *l.pair.target, l.pair.draft.get(), req, !o.json);
  if (o.json) {
    json j = cli::result_json(r, l.prompt, req, k > 0 ? "speculative" : "baseline");
    if (!plan.is_null()) j["tree_plan"] = plan;
    j["warnings"] = l.pair.warnings;
    j["memory"] = cli::memory_json(*l.pair.target, l.pair.draft.get());
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "\n\n" << cli::stats_line(r.stats, k) << "\n";
  }
  return 0;
}

// First index where the two token lists differ, or -1 when identical.
long first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<long>(n);
}

int cmd_compare(const cli::CommonOptions& o) {
  Loaded l = load(o, o.drafter == "model");
  const int k = effective_k(o, l.pair);
  Generator g(*l.pair.target, l.pair.draft.get());
  const GenerateRequest base_req = cli::make_request(o, l.prompt, 0);
  GenerateRequest spec_req = cli::make_request(o, l.prompt, k);
  const json plan = cli::plan_tree(o, l.pair, spec_req);
  const GenerationResult base = run_one(g, *l.pair.target, l.pair.draft.get(), base_req, false);
  const GenerationResult spec = run_one(g, *l.pair.target, l.pair.draft.get(), spec_req, false);
  const long diff = first_difference(base.tokens, spec.tokens);
  const double speedup = base.stats.tokens_per_s() > 0 ? spec.stats.tokens_per_s() / base.stats.tokens_per_s() : 0.0;
  if (o.json) {
    json j;
    j["baseline"] = cli::result_json(base, l.prompt, base_req, "baseline");
    j["speculative"] = cli::result_json(spec, l.prompt, spec_req, "speculative");
    if (!plan.is_null()) j["speculative"]["tree_plan"] = plan;
    j["identical"] = diff < 0;
    j["first_difference"] = diff < 0 ? json(nullptr) : json(diff);
    j["speedup"] = speedup;
    j["warnings"] = l.pair.warnings;
    j["memory"] = cli::memory_json(*l.pair.target, l.pair.draft.get());
    std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  } else {
    std::cout << "=== baseline ===\n" << base.text << "\n" << cli::stats_line(base.stats, 0) << "\n\n";
    std::cout << "=== speculative ===\n" << spec.text << "\n" << cli::stats_line(spec.stats, k) << "\n\n";
    std::printf("speedup %.2fx; %s\n", speedup,
                diff < 0 ? "identical tokens" : ("first difference at token " + std::to_string(diff)).c_str());
  }
  return 0;
}

// Maps an exception to a stable error kind for --json.
json error_json(const std::exception& e) {
  std::string kind = "error";
  if (auto* g = dynamic_cast<const GgufError*>(&e)) kind = gguf_error_kind_name(g->kind());
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
  CLI::App* cmp = app.add_subcommand("compare", "baseline then speculative on the same prompt");
  cli::add_common_options(*cmp, cmp_o);
  cli::CalibrateOptions cal_o;
  CLI::App* cal = app.add_subcommand("calibrate", "measure the draft's acceptance by rank and forward timings");
  cli::add_calibrate_options(*cal, cal_o);
  cli::CommonOptions chat_o;
  CLI::App* chat = app.add_subcommand("chat", "interactive multi-turn chat on the terminal");
  cli::add_common_options(*chat, chat_o);
  cli::BenchOptions bench_o;
  CLI::App* bench = app.add_subcommand("bench", "tau and tokens/s against node budget: chains, trees, n-gram");
  cli::add_bench_options(*bench, bench_o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (cal->parsed()) {
    try {
      return cli::cmd_calibrate(cal_o);
    } catch (const std::exception& e) {
      if (cal_o.json) std::cout << error_json(e).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      else std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (bench->parsed()) {
    try {
      return cli::cmd_bench(bench_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  if (chat->parsed()) {
    if (chat_o.draft == "ngram") chat_o.drafter = "ngram";
    if (chat_o.draft == "none") chat_o.drafter = "none";
    try {
      return cli::cmd_chat(chat_o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 1;
    }
  }
  cli::CommonOptions& o = gen->parsed() ? gen_o : cmp_o;
  CLI::App* sub = gen->parsed() ? gen : cmp;
  // `--draft ngram` / `--draft none` name a drafter rather than a file (FAULT-KINDS usage).
  if (o.draft == "ngram") o.drafter = "ngram";
  if (o.draft == "none") o.drafter = "none";
  o.chat_given = sub->count("--chat") > 0;
  o.prompt_given = sub->count("--prompt") > 0;
  if (!o.chat_given && !o.prompt_given) {
    std::fprintf(stderr, "error: one of --prompt or --chat is required\n");
    return 2;
  }
  try {
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
