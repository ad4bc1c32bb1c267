// Value types between the Benchmark view (benchmark_view.h) and the engine thread
// (EngineWorker::runBench): what to run and what came back.
#pragma once

#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

#include <string>
#include <vector>

#include "app/cli/bench/records.h"

namespace specchat::ui {

// Benchmark job ids carry bit 61 so they never collide with chat or compare jobs (engine_types.h).
inline constexpr quint64 kBenchJobBit = quint64{1} << 61;

// One benchmark sweep (app/cli/bench/runner.h run_suite), greedy.
struct BenchJob {
  quint64 id = 0;            // for EngineWorker::stop(id); not colliding with chat jobs
  QString suite_path;        // a suite file (app/cli/bench/suite.h)
  int per_group = 2;         // the first N prompts of each category / tier; 0 = all
  QString configs;           // bench::parse_configs syntax, e.g. "baseline,chain:k=4"
  QList<int> concurrency{1};  // sequences decoded together, each level a pass over the prompts
  int max_tokens = 32;       // per request
  int repeat = 1;
};

// What a sweep gave: the run (records, waves, metadata), prompts that could not fit, and
// warnings; `error` non-empty when it could not run (bad suite or configurations, no models).
// A sweep stopped by the user has run.meta.truncated set.
struct BenchResult {
  quint64 job_id = 0;
  bench::BenchRun run;
  std::vector<std::string> skipped;
  QStringList warnings;
  QString error;
};

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::ui::BenchJob)
Q_DECLARE_METATYPE(specchat::ui::BenchResult)
Q_DECLARE_METATYPE(specchat::bench::BenchRun)
