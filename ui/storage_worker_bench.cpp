// StorageWorker's side of the Benchmark view (storage_worker.h): saved benchmark runs
// (bench_runs, schema 6) and the saved compare runs, which the view lists.
#include "ui/storage_worker.h"

namespace specchat::ui {

void StorageWorker::saveBenchRun(const BenchRunRecord& r) {
  if (!store_) {
    Q_EMIT benchStorageFailed(tr("Could not save the benchmark run: no database."));
    return;
  }
  try {
    Q_EMIT benchRunSaved(store_->save_bench_run(r));
    listBenchRuns();
  } catch (const std::exception& e) {
    Q_EMIT benchStorageFailed(tr("Could not save the benchmark run: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::listBenchRuns() {
  if (!store_) {
    Q_EMIT benchRunsListed({});
    return;
  }
  try {
    Q_EMIT benchRunsListed(store_->bench_runs());
  } catch (const std::exception& e) {
    Q_EMIT benchStorageFailed(tr("Could not list the benchmark runs: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::loadBenchRun(qint64 id) {
  if (!store_) return;
  try {
    const std::optional<BenchRunRecord> r = store_->bench_run(id);
    if (!r) {
      Q_EMIT benchStorageFailed(tr("Could not open the benchmark run: it no longer exists."));
      return;
    }
    Q_EMIT benchRunLoaded(*r);
  } catch (const std::exception& e) {
    Q_EMIT benchStorageFailed(tr("Could not open the benchmark run: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::deleteBenchRun(qint64 id) {
  if (!store_) return;
  try {
    store_->delete_bench_run(id);
  } catch (const std::exception& e) {
    Q_EMIT benchStorageFailed(tr("Could not delete the benchmark run: %1").arg(QString::fromUtf8(e.what())));
  }
  listBenchRuns();
}

void StorageWorker::listCompareRuns() {
  if (!store_) {
    Q_EMIT compareRunsListed({});
    return;
  }
  try {
    Q_EMIT compareRunsListed(store_->compare_runs());
  } catch (const std::exception& e) {
    Q_EMIT benchStorageFailed(tr("Could not list the compare runs: %1").arg(QString::fromUtf8(e.what())));
  }
}

}  // namespace specchat::ui
