// Section (d) of the GPU check: issue 13's table (τ and decode tokens/s of every drafter against
// plain decoding) on the held-out prompts, with the target on the GPU, the way `specchat-cli
// bench` measures it on the CPU. The prompts come pre-encoded (resources/bench/
// heldout-prompt-ids.txt): the GPU machine has no tokenizer library.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/gpu_bench/bench.h"
#include "app/gpu_bench/common.h"
#include "engine/drafters/install.h"
#include "engine/generator.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/run_totals.h"
#include "engine/runtime/spec_settings.h"

namespace specchat::bench {

namespace {

struct Cfg {
  std::string name;
  SpecSettings s;
  bool draft_on_gpu = false;  // the draft model on the device (else on the host CPU)
};

Cfg cfg(const std::string& name, DrafterChoice d, TreeMode mode, int k_or_budget, int depth = 1, int branch = 1) {
  Cfg c;
  c.name = name;
  c.s.drafter = d;
  c.s.tree = mode;
  c.s.draft_k = d == DrafterChoice::none ? 0 : k_or_budget;
  c.s.node_budget = k_or_budget;
  c.s.depth = depth;
  c.s.branch = branch;
  return c;
}

}  // namespace

std::vector<std::vector<int32_t>> load_prompt_ids(const std::string& path, int max_prompts) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open the prompt ids file " + path + " (scripts/make-prompt-ids writes it)");
  std::vector<std::vector<int32_t>> out;
  std::string line;
  for (int lineno = 1; std::getline(in, line) && static_cast<int>(out.size()) < max_prompts; ++lineno) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    const std::string where = path + ":" + std::to_string(lineno) + ": ";
    std::string kind, word;
    ls >> kind;
    if (kind != "text" && kind != "chat") throw std::runtime_error(where + "a line starts with text or chat, not '" + kind + "'");
    std::vector<int32_t> ids;
    while (ls >> word) {
      int32_t v = 0;
      const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
      if (ec != std::errc() || end != word.data() + word.size() || v < 0) {
        throw std::runtime_error(where + "'" + word + "' is not a token id (a whole number from 0 to 2147483647)");
      }
      ids.push_back(v);
    }
    if (ids.empty()) throw std::runtime_error(where + "a prompt without ids");
    out.push_back(std::move(ids));
  }
  if (out.empty()) throw std::runtime_error(path + " holds no prompts");
  return out;
}

bool bench_spec(Report& rep, const SpecRun& run) {
  const std::vector<std::vector<int32_t>> prompts = load_prompt_ids(run.prompts_path, run.max_prompts);
  LlamaModel::Options ot;
  ot.backend = run.backend;
  const std::string dir = run.models_dir;
  auto target = LlamaModel::load(dir + "/specchat-target.gguf", ot);
  LlamaModel::Options od;
  od.n_ctx = target->n_ctx();
  od.pool = target->cpu_pool();  // one pool when both run on the CPU (null on CUDA: the draft makes its own)
  auto draft = LlamaModel::load(dir + "/specchat-draft.gguf", od);
  std::unique_ptr<LlamaModel> draft_dev;
  if (run.backend == BackendKind::cuda) {
    LlamaModel::Options og = od;
    og.pool = nullptr;
    og.backend = BackendKind::cuda;
    draft_dev = LlamaModel::load(dir + "/specchat-draft.gguf", og);
  }
  const int nv = target->config().n_vocab;
  for (const auto& p : prompts) {
    for (int32_t id : p) {
      if (id >= nv) throw std::runtime_error(run.prompts_path + ": token id " + std::to_string(id) + " past the target's vocabulary");
    }
  }
  // Prompts that leave room for -n tokens and a draft (as bench: prompt + n + 64 within the
  // context); the others are left out and counted, and none left is an error.
  std::vector<std::vector<int32_t>> fit;
  for (const auto& p : prompts) {
    if (static_cast<int>(p.size()) + run.n + 64 < target->n_ctx()) fit.push_back(p);
  }
  if (fit.empty()) {
    throw std::runtime_error("no prompt of " + run.prompts_path + " leaves room for " + std::to_string(run.n) +
                             " tokens and a draft in the target's context of " + std::to_string(target->n_ctx()) +
                             " tokens (lower -n)");
  }
  const size_t skipped = prompts.size() - fit.size();
  // Both feature drafters from the models folder (bound to the target: a mismatch throws).
  Generator g(*target, draft.get());
  FeatureDrafterRequest fr;
  fr.block = fr.mtp = true;
  fr.block_path = dir + "/specchat-dflash.gguf";
  fr.mtp_path = dir + "/specchat-mtp.gguf";
  const FeatureDrafters fd = install_feature_drafters(g.engine(), fr);
  std::unique_ptr<Generator> g_dev;
  if (draft_dev) g_dev = std::make_unique<Generator>(*target, draft_dev.get());

  using D = DrafterChoice;
  using M = TreeMode;
  std::vector<Cfg> cfgs = {cfg("baseline", D::none, M::chain, 0)};
  for (int k : {2, 3, 4, 6}) cfgs.push_back(cfg("model chain k=" + std::to_string(k), D::model, M::chain, k));
  for (int n : {16, 32, 64}) cfgs.push_back(cfg("model tree N=" + std::to_string(n), D::model, M::dynamic, n, 6, 4));
  if (g_dev) {
    Cfg c = cfg("model chain k=4 (draft on GPU)", D::model, M::chain, 4);
    c.draft_on_gpu = true;
    cfgs.push_back(c);
  }
  cfgs.push_back(cfg("block chain k=3", D::block, M::chain, 3));
  for (int bs : {8, 16}) {
    if (bs > fd.block_size) continue;
    const std::string b = "B=" + std::to_string(bs);
    cfgs.push_back(cfg("block chain " + b, D::block, M::chain, bs - 1));
    cfgs.push_back(cfg("block tree " + b + " N=" + std::to_string(bs * 2), D::block, M::dynamic, bs * 2, bs - 1, 3));
    cfgs.push_back(cfg("block tree " + b + " N=" + std::to_string(bs * 4), D::block, M::dynamic, bs * 4, bs - 1, 4));
  }
  for (int k = 1; k <= 4; ++k) cfgs.push_back(cfg("mtp chain k=" + std::to_string(k), D::mtp, M::chain, k));
  cfgs.push_back(cfg("mtp tree N=12", D::mtp, M::dynamic, 12, 4, 3));

  const char* where = run.backend == BackendKind::cuda ? "target on the GPU, drafts on the host CPU unless named"
                                                       : "everything on the CPU";
  std::printf("\n(d) drafters on the held-out prompts (%zu prompts, %d tokens each, greedy; %s)\n", fit.size(), run.n,
              where);
  if (skipped > 0) {
    std::printf("  %zu of the %zu prompts left out: too long for %d more tokens in a context of %d\n", skipped,
                prompts.size(), run.n, target->n_ctx());
  }
  GenerateRequest warm;
  warm.prompt = fit.front();
  warm.max_tokens = 8;
  warm.spec = to_spec_config(cfgs[1].s);
  g.warm_up(warm);  // device and kernel start-up outside every timed run
  if (g_dev) g_dev->warm_up(warm);

  std::vector<RunTotals> tot(cfgs.size());
  bool all_identical = true;
  for (size_t pi = 0; pi < fit.size(); ++pi) {
    std::vector<int32_t> base_tokens;
    for (size_t ci = 0; ci < cfgs.size(); ++ci) {
      Generator& gen = cfgs[ci].draft_on_gpu ? *g_dev : g;
      GenerateRequest req;
      req.prompt = fit[pi];
      req.max_tokens = run.n;
      req.spec = to_spec_config(cfgs[ci].s);
      gen.clear_cache();  // every configuration starts cold
      const GenerationResult r = gen.generate(req);
      if (ci == 0) base_tokens = r.tokens;
      const bool same = tot[ci].add(r, base_tokens);
      all_identical = all_identical && same;
    }
  }
  const double base_tps = tot[0].tokens_per_s();
  std::printf("  %-32s %6s %6s %9s %8s %9s %9s %9s\n", "config", "tau", "alpha", "tok/s", "speedup", "draft ms", "verify ms",
              "identical");
  for (size_t ci = 0; ci < cfgs.size(); ++ci) {
    const RunTotals& t = tot[ci];
    const double tau = t.tau(), alpha = t.alpha(), tps = t.tokens_per_s();
    const double speedup = base_tps > 0 ? tps / base_tps : 0;
    const double steps = static_cast<double>(std::max(1L, t.steps));
    std::printf("  %-32s %6.2f %6.3f %9.1f %7.2fx %9.3f %9.3f %5ld/%ld%s\n", cfgs[ci].name.c_str(), tau, alpha, tps, speedup,
                t.draft_ms / steps, t.verify_ms / steps, t.identical, t.runs, t.identical == t.runs ? "" : "  FAIL");
    rep.section("spec").push_back(Row()
                                      .str("config", cfgs[ci].name)
                                      .str("target_backend", run.backend == BackendKind::cuda ? "cuda" : "cpu")
                                      .num("tau", tau)
                                      .num("acceptance_rate", alpha)
                                      .num("tokens_per_s", tps)
                                      .num("speedup", speedup)
                                      .num("draft_ms_per_step", t.draft_ms / steps)
                                      .num("verify_ms_per_step", t.verify_ms / steps)
                                      .num("tokens", static_cast<double>(t.tokens))
                                      .num("runs", static_cast<double>(t.runs))
                                      .num("identical", static_cast<double>(t.identical)));
  }
  return all_identical;
}

}  // namespace specchat::bench
