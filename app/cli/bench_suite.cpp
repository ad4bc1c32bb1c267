// `specchat-cli bench --suite FILE`: the SPEED-Bench-style sweep (issue 15) over the bench/
// library: suite, configurations, concurrency levels, repeats; summary on stdout; reports.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "app/cli/bench.h"
#include "app/cli/data_files.h"
#include "app/cli/pipo.h"
#include "app/cli/remote.h"
#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/configs.h"
#include "app/cli/bench/endpoint_backend.h"
#include "app/cli/bench/engine_backend.h"
#include "app/cli/bench/machine_info.h"
#include "app/cli/bench/progress.h"
#include "app/cli/bench/report_files.h"
#include "app/cli/bench/runner.h"
#include "app/cli/bench/suite.h"
#include "engine/model.h"
#include "engine/model_pair.h"
#ifdef SPECCHAT_BENCH_HTML
#include "app/cli/bench/report_html.h"
#endif

namespace specchat::cli {

namespace {

// A bundled suite name, or the path as given.
std::string resolve_suite(const std::string& s) {
  if (s != "qualitative" && s != "throughput") return s;
  return bundled_data_file(s + ".json");
}

std::string fidelity_text(const bench::GroupAggregate& g) {
  if (g.fidelity_samples == 0) return "";
  char b[96];
  std::snprintf(b, sizeof b, "; KL %.3f nats mean, %.3f max, %d samples", g.fidelity_kl_mean, g.fidelity_kl_max,
                g.fidelity_samples);
  return b;
}

void print_summary(const bench::Aggregates& agg) {
  std::printf("%-24s %4s %-14s %5s %6s %7s %22s %9s %9s\n", "config", "conc", "group", "n", "tau", "alpha",
              "speedup [95% CI]", "TTFT p50", "TPOT p50");
  for (const bench::GroupAggregate& g : agg.groups) {
    if (g.kind != "all" && g.kind != "category" && g.kind != "tier") continue;
    char ci[64];
    std::snprintf(ci, sizeof ci, "%.2fx [%.2f, %.2f]", g.speedup.mean, g.speedup_ci.lo, g.speedup_ci.hi);
    std::printf("%-24s %4d %-14s %5d %6.2f %7.3f %22s %8.1fms %8.2fms%s\n", g.config.c_str(), g.concurrency,
                g.group.c_str(), g.requests, g.tau, g.alpha, ci, g.ttft_ms.p50, g.tpot_ms.p50,
                g.approximate ? ("  APPROXIMATE (not verified by the target; " + std::to_string(g.divergent) +
                                 " differ from baseline" + fidelity_text(g) + ")").c_str()
                              : "");
  }
}

}  // namespace

int cmd_bench_suite(BenchOptions& o) {
  CommonOptions& c = o.common;
  if (c.temp > 0) throw std::runtime_error("bench --suite runs greedy decoding only (identity with baseline is checked)");
  const std::string suite_path = resolve_suite(o.suite);
  bench::BenchSuite suite = bench::load_suite(suite_path);
  if (o.per_group > 0) suite = bench::first_per_group(suite, o.per_group);
  bench::RunOptions ro;
  ro.configs = bench::parse_configs(o.configs);
  for (bench::BenchConfig& bc : ro.configs) bc.settings.backoff = !c.no_backoff;
  ro.concurrency = o.concurrency_list.empty() ? std::vector<int>{1} : o.concurrency_list;
  std::sort(ro.concurrency.begin(), ro.concurrency.end());
  ro.concurrency.erase(std::unique(ro.concurrency.begin(), ro.concurrency.end()), ro.concurrency.end());
  // PIPO's options without a pipo configuration, or with a remote server, would be ignored.
  const bool has_pipo = std::any_of(ro.configs.begin(), ro.configs.end(), [](const bench::BenchConfig& b) { return b.approximate(); });
  if ((!c.pipo.empty() || c.pipo_fidelity > 0) && !c.endpoint.empty()) {
    throw std::invalid_argument("--pipo and --pipo-fidelity run on this machine's engine; they cannot be combined with --endpoint");
  }
  if ((!c.pipo.empty() || c.pipo_fidelity > 0) && !has_pipo) {
    throw std::invalid_argument("--pipo and --pipo-fidelity need a pipo:t=X configuration in --configs");
  }
  ro.repeat = o.repeat;
  ro.max_tokens = c.n;
  ro.max_time_s = o.max_time;
  if (!o.report.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.report, ec);
    if (ec || !std::filesystem::is_directory(o.report)) throw std::runtime_error("cannot create the report directory " + o.report);
  }

  bench::BenchRun run;
  std::vector<std::string> skipped;
  std::optional<ModelPair> pair;
  if (!c.endpoint.empty()) {
    // An OpenAI-compatible server runs the requests (bench/endpoint_backend.h).
    bench::EndpointBackend::check_configs(ro.configs);
    bench::EndpointOptions eo;
    eo.url = c.endpoint;
    eo.api_key = endpoint_api_key(c);
    eo.model = c.model_name;
    eo.capacity = std::max(64, ro.concurrency.back());
    bench::EndpointBackend backend(eo);
    bench::ProgressBar bar;
    run = bench::run_suite(backend, suite, ro, [&](long d, long t, double s) { bar.update(d, t, s); }, &skipped);
  } else {
    PairOptions po;
    po.target_path = c.model;
    // --draft, the bundled draft, or one found beside --model, when a configuration drafts with a model.
    const bool need_draft = std::any_of(ro.configs.begin(), ro.configs.end(),
                                        [](const bench::BenchConfig& b) { return b.settings.drafter == DrafterChoice::model; });
    apply_draft(c, need_draft, po);
    po.n_threads = c.threads;
    po.n_seq = ro.concurrency.back();
    apply_backends(c, po);
    pair.emplace(ModelPair::load(po));
    for (const std::string& w : pair->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    bench::EngineBackend backend(*pair, c.threads);
    // PIPO configurations: the release given with --pipo, else the bundled one; checked against
    // the target the baseline runs (the release must have been made from it).
    std::optional<PipoUnit> pipo;
    std::unique_ptr<LlamaModel> fidelity_plain;
    if (std::any_of(ro.configs.begin(), ro.configs.end(), [](const bench::BenchConfig& b) { return b.approximate(); })) {
      PipoLoadOptions lo;
      lo.backbone.n_threads = c.threads;
      lo.backbone.backend = parse_backend(c.backend);
      lo.plain_target = pair->target->path();
      pipo.emplace(load_pipo_release(pipo_release_path(c.pipo.empty() ? "bundled" : c.pipo), lo));
      std::fprintf(stderr, "PIPO release '%s' loaded for the pipo configurations (approximate: not verified by the target)\n",
                   pipo->info.release.c_str());
      backend.set_pipo(&*pipo);
      if (c.pipo_fidelity > 0) {  // the gauge's own copy: the engine's target is busy with baseline
        LlamaModel::Options po2;
        po2.n_threads = c.threads;
        po2.backend = parse_backend(c.backend);
        po2.kv_type = parse_kv_type(c.kv_type);
        po2.activations = parse_activations(c.activations);
        po2.n_ctx = pair->target->n_ctx();
        fidelity_plain = LlamaModel::load(pair->target->path(), po2);
        backend.set_pipo_fidelity(fidelity_plain.get(), c.pipo_fidelity);
      }
    }
    {
      bench::ProgressBar bar;
      run = bench::run_suite(backend, suite, ro, [&](long d, long t, double s) { bar.update(d, t, s); }, &skipped);
    }
    for (const std::string& w : backend.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  for (const std::string& s : skipped) std::fprintf(stderr, "skipped %s\n", s.c_str());

  bench::RunMeta& m = run.meta;
  if (pair) {
    bench::describe_machine_and_models(m, *pair, c.backend);
  } else {
    m.date_utc = bench::utc_now_iso();
    m.git_commit = bench::git_commit(SPECCHAT_SOURCE_DIR);
    m.cpu_model = bench::cpu_model_name();  // of this client; the server's is not known here
    m.cpu_cores = bench::cpu_cores();
    m.backend = "endpoint";
    m.gpu = "unknown (the server's)";
    m.target_model = c.endpoint + (c.model_name.empty() ? "" : " model " + c.model_name);
    m.draft_model = "the server's";
  }
  m.suite_name = suite.name;
  m.suite_path = suite_path;
  std::vector<std::string> cfg_names;
  for (const bench::BenchConfig& bc : ro.configs) cfg_names.push_back(bc.name);
  m.settings = {{"configs", cfg_names}, {"concurrency", ro.concurrency}, {"repeat", ro.repeat},
                {"max_tokens", ro.max_tokens}, {"max_time_s", ro.max_time_s}, {"per_group", o.per_group},
                {"threads", c.threads}, {"temperature", 0}, {"bootstrap_seed", o.bootstrap_seed},
                {"bootstrap_resamples", 1000}, {"prompts", suite.prompts.size()},
                {"endpoint", c.endpoint}, {"kv_type", c.kv_type}, {"activations", c.activations}, {"draft_backoff", !c.no_backoff}};
  const bench::Aggregates agg = bench::aggregate(run, {1000, o.bootstrap_seed});
  print_summary(agg);
  if (agg.failures > 0) {
    std::fprintf(stderr, "FAILURE: %d requests differ from baseline or failed (left out of the aggregates):\n", agg.failures);
    for (const bench::RequestRecord& r : run.records) {
      if (!r.failed()) continue;
      std::fprintf(stderr, "  %s %s @%d repeat %d: %s\n", r.prompt_id.c_str(), r.config.c_str(), r.concurrency, r.repeat,
                   r.error.empty() ? ("first difference at token " + std::to_string(r.first_diff)).c_str() : r.error.c_str());
    }
  }
  if (!o.report.empty()) {
    const std::string d = o.report + "/";
    bench::write_text_file(d + "report.json", bench::report_json(run, agg, skipped).dump(1) + "\n");
    bench::write_text_file(d + "per_request.csv", bench::per_request_csv(run));
    bench::write_text_file(d + "summary.csv", bench::summary_csv(agg));
#ifdef SPECCHAT_BENCH_HTML
    bench::write_text_file(d + "report.html", bench::report_html(run, agg, skipped));
    std::fprintf(stderr, "wrote %sreport.json, per_request.csv, summary.csv, report.html\n", d.c_str());
#else
    std::fprintf(stderr, "wrote %sreport.json, per_request.csv, summary.csv (report.html needs a build with Qt Charts "
                 "and Qt SVG: qt6-charts-dev, libqt6svg6-dev)\n", d.c_str());
#endif
  }
  if (run.records.empty()) {
    std::fprintf(stderr, "error: nothing was measured: every prompt was skipped or the sweep stopped before the first wave\n");
    return 1;
  }
  return agg.failures > 0 ? 1 : 0;
}

}  // namespace specchat::cli
