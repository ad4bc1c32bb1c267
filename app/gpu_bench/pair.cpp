// Section (c) of the GPU check: the bundled pair on GPU against CPU, lossless speculative
// decoding on the GPU, and where the draft model should run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/gpu_bench/bench.h"
#include "app/gpu_bench/common.h"
#include "engine/generator.h"

namespace specchat::bench {

namespace {

// Tolerance on max|gpu − cpu| / max|cpu| of the logits, F16 weights. Both backends use the same
// F16 weight values; the GPU additionally rounds each matmul input (activations) to F16
// (cublasGemmEx needs one input type), a relative error of 2^-11 ≈ 4.9e-4 per element at each
// of the n_layer · 7 + 1 products, which partly averages out. 1e-2 leaves room for that; tighten
// it once measured.
constexpr double kLogitTolF16 = 1e-2;

struct Cmp {
  double max_abs = 0, norm = 0, argmax_agree = 0;
};

Cmp compare_logits(std::span<const float> gpu, const std::vector<float>& cpu, int n_vocab) {
  Cmp c;
  double scale = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    c.max_abs = std::max(c.max_abs, std::fabs(static_cast<double>(gpu[i]) - cpu[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(cpu[i])));
  }
  c.norm = scale > 0 ? c.max_abs / scale : c.max_abs;
  const size_t rows = cpu.size() / static_cast<size_t>(n_vocab);
  size_t agree = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto g = gpu.subspan(r * n_vocab, static_cast<size_t>(n_vocab));
    const auto cb = cpu.begin() + static_cast<long>(r * n_vocab);
    agree += (std::max_element(g.begin(), g.end()) - g.begin()) == (std::max_element(cb, cb + n_vocab) - cb);
  }
  c.argmax_agree = rows ? static_cast<double>(agree) / static_cast<double>(rows) : 1.0;
  return c;
}

GenerationResult run(LlamaModel& target, LlamaModel* draft, const GenerateRequest& req) {
  target.kv().truncate(0);  // a fresh cache per run, so every mode starts alike
  if (draft) draft->kv().truncate(0);
  Generator g(target, draft);
  return g.generate(req);
}

GenerateRequest request(const std::vector<int32_t>& prompt, int n, int draft_k, TreeMode mode) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.spec.draft_k = draft_k;
  r.spec.tree.mode = mode;
  if (mode == TreeMode::dynamic) {
    r.spec.tree.node_budget = 16;
    r.spec.tree.depth = 5;
    r.spec.tree.branch = 3;
  }
  return r;
}

long first_difference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<long>(i);
  }
  return a.size() == b.size() ? -1 : static_cast<long>(n);
}

}  // namespace

bool bench_pair(Report& rep, const std::string& models_dir) {
  bool ok = true;
  LlamaModel::Options oc, og;
  og.backend = BackendKind::cuda;
  const std::string tpath = models_dir + "/specchat-target.gguf", dpath = models_dir + "/specchat-draft.gguf";
  auto tc = LlamaModel::load(tpath, oc), tg = LlamaModel::load(tpath, og);
  og.n_ctx = oc.n_ctx = tg->n_ctx();
  auto dc = LlamaModel::load(dpath, oc), dg = LlamaModel::load(dpath, og);
  const int nv = tg->config().n_vocab;

  std::printf("\n(c) bundled pair: GPU vs CPU logits (tolerance %.0e normalized, F16 weights)\n", kLogitTolF16);
  const std::vector<int32_t> ids = prompt_ids(48, nv);
  for (auto [name, cpu, gpu] : {std::tuple{"target", tc.get(), tg.get()}, std::tuple{"draft", dc.get(), dg.get()}}) {
    // A 48-token chain, every row, then a 16-node tree after it.
    cpu->kv().truncate(0);
    gpu->kv().truncate(0);
    const Batch chain = Batch::chain(ids, 0, true);
    const auto lc = cpu->forward(chain);
    const std::vector<float> want(lc.begin(), lc.end());
    const Cmp a = compare_logits(gpu->forward(chain), want, nv);
    const Batch tree = tree_batch(16, 48, nv);
    const auto tcl = cpu->forward(tree);
    const std::vector<float> want_t(tcl.begin(), tcl.end());
    const Cmp t = compare_logits(gpu->forward(tree), want_t, nv);
    const bool pass = a.norm <= kLogitTolF16 && t.norm <= kLogitTolF16;
    ok = ok && pass;
    std::printf("  %-7s chain48: max abs %.3g, normalized %.3g, argmax agree %.3f | tree16: max abs %.3g, "
                "normalized %.3g, argmax agree %.3f  %s\n",
                name, a.max_abs, a.norm, a.argmax_agree, t.max_abs, t.norm, t.argmax_agree, pass ? "ok" : "FAIL");
    rep.section("logits").push_back(Row()
                                        .str("model", name)
                                        .num("chain_max_abs", a.max_abs)
                                        .num("chain_max_norm", a.norm)
                                        .num("chain_argmax_agree", a.argmax_agree)
                                        .num("tree_max_abs", t.max_abs)
                                        .num("tree_max_norm", t.norm)
                                        .num("tree_argmax_agree", t.argmax_agree)
                                        .num("tolerance", kLogitTolF16)
                                        .boolean("pass", pass));
  }

  std::printf("\n(c) greedy speculative == baseline on the GPU (96 tokens, fixed 24-token prompt)\n");
  const std::vector<int32_t> prompt = prompt_ids(24, nv);
  const int n = 96;
  const GenerationResult base = run(*tg, dg.get(), request(prompt, n, 0, TreeMode::chain));
  const GenerationResult base_cpu = run(*tc, dc.get(), request(prompt, n, 0, TreeMode::chain));
  const long cpu_diff = first_difference(base.tokens, base_cpu.tokens);
  std::printf("  baseline  GPU %7.1f tok/s, CPU %7.1f tok/s; GPU tokens %s CPU tokens%s\n", base.stats.tokens_per_s(),
              base_cpu.stats.tokens_per_s(), cpu_diff < 0 ? "==" : "!=",
              cpu_diff < 0 ? "" : (" (first difference at " + std::to_string(cpu_diff) + ", F16 rounding: informational)").c_str());
  rep.section("speculative").push_back(Row()
                                           .str("mode", "baseline")
                                           .num("gpu_tokens_per_s", base.stats.tokens_per_s())
                                           .num("cpu_tokens_per_s", base_cpu.stats.tokens_per_s())
                                           .num("gpu_vs_cpu_first_difference", static_cast<double>(cpu_diff)));
  struct Mode { const char* name; int k; TreeMode mode; };
  for (const Mode& md : {Mode{"chain k=4", 4, TreeMode::chain}, Mode{"dynamic tree 16/5/3", 4, TreeMode::dynamic}}) {
    const GenerationResult r = run(*tg, dg.get(), request(prompt, n, md.k, md.mode));
    const long diff = first_difference(base.tokens, r.tokens);
    ok = ok && diff < 0;
    std::printf("  %-20s %7.1f tok/s (%.2fx), alpha %.2f, tau %.2f, %s\n", md.name, r.stats.tokens_per_s(),
                base.stats.tokens_per_s() > 0 ? r.stats.tokens_per_s() / base.stats.tokens_per_s() : 0.0,
                r.stats.acceptance_rate(), r.stats.mean_accepted_length(),
                diff < 0 ? "identical to baseline" : ("FAIL: differs at token " + std::to_string(diff)).c_str());
    rep.section("speculative").push_back(Row()
                                             .str("mode", md.name)
                                             .num("gpu_tokens_per_s", r.stats.tokens_per_s())
                                             .num("acceptance_rate", r.stats.acceptance_rate())
                                             .num("mean_accepted_length", r.stats.mean_accepted_length())
                                             .boolean("identical_to_baseline", diff < 0));
  }

  std::printf("\n(c) where the draft runs (target on the GPU, chain k=4)\n");
  for (auto [where, draft] : {std::pair{"draft on GPU", dg.get()}, std::pair{"draft on CPU", dc.get()}}) {
    const GenerationResult r = run(*tg, draft, request(prompt, n, 4, TreeMode::chain));
    const double steps = std::max(1, r.stats.n_steps);
    const long diff = first_difference(base.tokens, r.tokens);
    ok = ok && diff < 0;
    std::printf("  %-13s %7.1f tok/s, draft %.3f ms/step, verify %.3f ms/step%s\n", where, r.stats.tokens_per_s(),
                r.stats.draft_ms / steps, r.stats.verify_ms / steps, diff < 0 ? "" : " (FAIL: tokens differ)");
    rep.section("draft_placement").push_back(Row()
                                                 .str("draft", where)
                                                 .num("tokens_per_s", r.stats.tokens_per_s())
                                                 .num("draft_ms_per_step", r.stats.draft_ms / steps)
                                                 .num("verify_ms_per_step", r.stats.verify_ms / steps)
                                                 .boolean("identical_to_baseline", diff < 0));
  }
  return ok;
}

}  // namespace specchat::bench
