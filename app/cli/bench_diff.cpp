// `specchat-cli bench-diff` and `specchat-cli bench-suite` (issue 15).
#include <cstdio>
#include <iostream>

#include "app/cli/bench.h"
#include "app/cli/bench/diff.h"
#include "app/cli/bench/report_files.h"
#include "app/cli/bench/throughput_gen.h"
#include "engine/model.h"
#include "engine/model_pair.h"

namespace specchat::cli {

void add_bench_diff_options(CLI::App& cmd, BenchDiffOptions& o) {
  cmd.add_option("A", o.a, "report.json of the first run (the reference)")->required();
  cmd.add_option("B", o.b, "report.json of the second run")->required();
  cmd.add_flag("--json", o.json, "print the rows as one JSON object");
  cmd.add_option("--seed", o.seed, "bootstrap seed");
}

void add_bench_suite_gen_options(CLI::App& cmd, BenchSuiteGenOptions& o) {
  cmd.add_option("--model,-m", o.model, "target GGUF whose tokenizer counts the tokens (default: the bundled target)");
  cmd.add_option("--buckets", o.buckets, "input lengths in tokens (default: scaled to the model's context)")
      ->delimiter(',')
      ->check(CLI::Range(8, 1 << 24));
  cmd.add_option("--per-cell", o.per_cell, "prompts per tier x bucket")->check(CLI::Range(1, 1000));
  cmd.add_option("--out,-o", o.out, "suite file to write")->required();
}

int cmd_bench_diff(const BenchDiffOptions& o) {
  const bench::LoadedReport a = bench::load_report(o.a), b = bench::load_report(o.b);
  const auto rows = bench::diff_runs(a.run, b.run, {1000, o.seed});
  if (o.json) {
    std::cout << bench::diff_json(rows).dump(1) << "\n";
  } else {
    std::printf("A: %s (%s, %s)\nB: %s (%s, %s)\n", o.a.c_str(), a.run.meta.git_commit.c_str(), a.run.meta.date_utc.c_str(),
                o.b.c_str(), b.run.meta.git_commit.c_str(), b.run.meta.date_utc.c_str());
    std::fputs(bench::diff_table(rows).c_str(), stdout);
  }
  return 0;
}

int cmd_bench_suite_gen(const BenchSuiteGenOptions& o) {
  PairOptions po;
  po.target_path = o.model;
  ModelPair pair = ModelPair::load(po);
  bench::ThroughputOptions to;
  to.buckets = o.buckets.empty() ? bench::default_buckets(pair.target->n_ctx()) : o.buckets;
  to.per_cell = o.per_cell;
  to.tokenizer = o.model.empty() ? "bundled target (resources/models/specchat-target.gguf)" : o.model;
  const bench::BenchSuite s = bench::make_throughput_suite([&](const std::string& t) { return pair.encode_prompt(t); }, to);
  bench::write_text_file(o.out, bench::suite_to_json(s).dump(1) + "\n");
  std::fprintf(stderr, "wrote %zu prompts to %s\n", s.prompts.size(), o.out.c_str());
  return 0;
}

}  // namespace specchat::cli
