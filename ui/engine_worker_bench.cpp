// EngineWorker::runBench (engine_worker.h): the Benchmark view's sweep on the engine thread,
// over the same bench library as `specchat-cli bench --suite` (app/cli/bench/).
#include <QElapsedTimer>

#include <algorithm>

#include "app/cli/bench/configs.h"
#include "app/cli/bench/engine_backend.h"
#include "app/cli/bench/runner.h"
#include "app/cli/bench/suite.h"
#include "engine/model.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

void EngineWorker::runBench(const BenchJob& job) {
  BenchResult out;
  out.job_id = job.id;
  if (!beginJob(job.id)) {
    out.error = tr("Stopped before it started.");
    Q_EMIT benchFinished(out);
    return;
  }
  try {
    bench::BenchSuite suite = bench::load_suite(job.suite_path.toStdString());
    if (job.per_group > 0) suite = bench::first_per_group(suite, job.per_group);
    bench::RunOptions ro;
    ro.configs = bench::parse_configs(job.configs.toStdString());
    for (int c : job.concurrency) ro.concurrency.push_back(c);
    std::sort(ro.concurrency.begin(), ro.concurrency.end());
    ro.concurrency.erase(std::unique(ro.concurrency.begin(), ro.concurrency.end()), ro.concurrency.end());
    if (ro.concurrency.empty() || ro.concurrency.front() < 1) throw std::invalid_argument("concurrency must be 1 or more");
    ro.repeat = job.repeat;
    ro.max_tokens = job.max_tokens;
    ro.cancel = &cancel_;

    // A pair of its own: the chat's KV cache (sized for one sequence) and its prefix reuse stay.
    PairOptions po = options_;
    po.n_seq = ro.concurrency.back();
    Q_EMIT benchProgress(job.id, 0, 0, 0.0);
    ModelPair pair = ModelPair::load(po);
    for (const std::string& w : pair.warnings) out.warnings << QString::fromStdString(w);
    bench::EngineBackend backend(pair, po.n_threads);

    QElapsedTimer since_update;
    since_update.start();
    long last_done = 0, last_total = 0;
    ro.on_wave = [&](const bench::BenchRun& so_far) {
      if (since_update.elapsed() < 300 && last_done < last_total) return;
      since_update.restart();
      Q_EMIT benchUpdated(job.id, so_far);
    };
    out.run = bench::run_suite(
        backend, suite, ro,
        [&](long done, long total, double elapsed_s) {
          last_done = done;
          last_total = total;
          Q_EMIT benchProgress(job.id, done, total, elapsed_s);
        },
        &out.skipped);
    for (const std::string& w : backend.warnings) out.warnings << QString::fromStdString(w);

    bench::RunMeta& m = out.run.meta;
    bench::describe_machine_and_models(m, pair, backend_name(po.backend));
    m.suite_name = suite.name;
    m.suite_path = job.suite_path.toStdString();
    std::vector<std::string> names;
    for (const bench::BenchConfig& c : ro.configs) names.push_back(c.name);
    m.settings = {{"configs", names},       {"concurrency", ro.concurrency}, {"repeat", ro.repeat},
                  {"max_tokens", ro.max_tokens}, {"per_group", job.per_group}, {"threads", po.n_threads},
                  {"temperature", 0},        {"bootstrap_seed", 1},           {"bootstrap_resamples", 1000},
                  {"prompts", suite.prompts.size()}, {"front_end", "app"}};
  } catch (const std::exception& e) {
    out.error = QString::fromStdString(e.what());
  } catch (...) {
    out.error = tr("unknown error");
  }
  endJob();
  Q_EMIT benchFinished(out);
}

}  // namespace specchat::ui
