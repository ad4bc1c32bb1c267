// View › Benchmark (benchmark_view.h): saved runs (open, compare two, delete) and the compare
// view's saved runs.
#include <QDateTime>
#include <QListWidget>
#include <QPushButton>
#include <QTabWidget>
#include <QTableWidget>

#include "app/cli/bench/diff.h"
#include "app/cli/bench/report_files.h"
#include "ui/benchmark_view.h"
#include "ui/storage_worker.h"

namespace specchat::ui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

void BenchmarkView::openSavedRun(qint64 id) {
  if (running_ != 0) {
    setStatus(tr("A benchmark is running: open saved runs when it has finished."), true);
    return;
  }
  post([id](StorageWorker* w) { w->loadBenchRun(id); });
}

void BenchmarkView::onRunsListed(const std::vector<BenchRunRecord>& runs) {
  saved_->clear();
  for (const BenchRunRecord& r : runs) {
    QString text = QStringLiteral("%1 \u00b7 %2 \u00b7 %3 requests")
                       .arg(QDateTime::fromMSecsSinceEpoch(r.created_ms).toString(QStringLiteral("yyyy-MM-dd HH:mm")),
                            q(r.title))
                       .arg(r.n_records);
    if (r.failures > 0) text += tr(", %1 failed").arg(r.failures);
    auto* it = new QListWidgetItem(text, saved_);
    it->setData(Qt::UserRole, QVariant::fromValue<qint64>(r.id));
  }
  if (saved_->count() > 0) saved_->setCurrentRow(0);
  open_button_->setEnabled(saved_->count() > 0);
  delete_button_->setEnabled(saved_->count() > 0);
  diff_button_->setEnabled(saved_->count() > 1);
  Q_EMIT savedRunsListed(saved_->count());
}

void BenchmarkView::diffSavedRuns(qint64 a, qint64 b) {
  diff_a_ = a;
  diff_b_ = b;
  diff_run_a_.reset();
  diff_run_b_.reset();
  post([a, b](StorageWorker* w) {
    w->loadBenchRun(a);
    w->loadBenchRun(b);
  });
}

void BenchmarkView::showDiff() {
  const std::vector<bench::DiffRow> rows = bench::diff_runs(*diff_run_a_, *diff_run_b_, {1000, 1});
  diff_->setRowCount(0);
  for (const bench::DiffRow& d : rows) {
    const int row = diff_->rowCount();
    diff_->insertRow(row);
    diff_->setItem(row, 0, cell(q(d.config)));
    diff_->setItem(row, 1, cell(QString::number(d.concurrency), true));
    diff_->setItem(row, 2, cell(q(d.group)));
    diff_->setItem(row, 3, cell(QString::number(d.tps_a, 'f', 1), true));
    diff_->setItem(row, 4, cell(QString::number(d.tps_b, 'f', 1), true));
    diff_->setItem(row, 5, cell(QStringLiteral("%1% [%2, %3]")
                                    .arg(100 * d.change, 0, 'f', 1)
                                    .arg(100 * d.change_ci.lo, 0, 'f', 1)
                                    .arg(100 * d.change_ci.hi, 0, 'f', 1),
                                true));
    diff_->setItem(row, 6, cell(d.significant ? tr("yes") : tr("no")));
    diff_->setItem(row, 7, cell(QStringLiteral("%1 → %2").arg(d.tau_a, 0, 'f', 2).arg(d.tau_b, 0, 'f', 2), true));
    diff_->setItem(row, 8, cell(QStringLiteral("%1 → %2").arg(d.speedup_a, 0, 'f', 2).arg(d.speedup_b, 0, 'f', 2),
                                true));
  }
  diff_->resizeColumnsToContents();
  setStatus(rows.empty() ? tr("The two runs have no configuration, concurrency and category in common.")
                         : tr("A against B: %1 rows; a change is significant when its 95% CI excludes 0.").arg(rows.size()));
  Q_EMIT diffShown(static_cast<int>(rows.size()));
}

void BenchmarkView::onRunLoaded(const BenchRunRecord& r) {
  if ((r.id == diff_a_ && !diff_run_a_) || (r.id == diff_b_ && !diff_run_b_)) {
    try {
      bench::BenchRun run = bench::parse_report(r.report_json, "saved run " + std::to_string(r.id)).run;
      (r.id == diff_a_ && !diff_run_a_ ? diff_run_a_ : diff_run_b_) = std::move(run);
    } catch (const std::exception& e) {
      diff_a_ = diff_b_ = 0;
      setStatus(tr("Could not compare the saved runs: %1").arg(QString::fromStdString(e.what())), true);
      return;
    }
    if (diff_run_a_ && diff_run_b_) {
      diff_a_ = diff_b_ = 0;
      showDiff();
    }
    return;
  }
  if (running_ != 0) return;
  try {
    const bench::LoadedReport lr = bench::parse_report(r.report_json, "saved run " + std::to_string(r.id));
    skipped_.clear();
    showRun(lr.run, kFinalResamples);
  } catch (const std::exception& e) {
    setStatus(tr("Could not open the saved run: %1").arg(QString::fromStdString(e.what())), true);
    return;
  }
  tabs_->setCurrentIndex(0);
  setStatus(tr("Saved run of %1: %2 (%3 requests).")
                .arg(QDateTime::fromMSecsSinceEpoch(r.created_ms).toString(QStringLiteral("yyyy-MM-dd HH:mm")),
                     q(r.title))
                .arg(r.n_records));
  Q_EMIT runShown();
}

void BenchmarkView::onCompareRunsListed(const std::vector<CompareRecord>& runs) {
  compare_->setRowCount(0);
  for (const CompareRecord& r : runs) {
    const int row = compare_->rowCount();
    compare_->insertRow(row);
    compare_->setItem(row, 0, cell(QDateTime::fromMSecsSinceEpoch(r.created_ms).toString(QStringLiteral("yyyy-MM-dd HH:mm"))));
    QString prompt = q(r.prompt).simplified();
    if (prompt.size() > 120) prompt = prompt.left(119) + QStringLiteral("\u2026");
    compare_->setItem(row, 1, cell(prompt));
    compare_->setItem(row, 2, cell(r.speedup > 0 ? QStringLiteral("%1\u00d7").arg(r.speedup, 0, 'f', 2) : tr("?"), true));
    compare_->setItem(row, 3,
                      cell(r.total_time_ratio > 0 ? QStringLiteral("%1\u00d7").arg(r.total_time_ratio, 0, 'f', 2) : tr("?"),
                           true));
    compare_->setItem(row, 4, cell(r.identical ? tr("identical") : tr("differs at token %1").arg(r.first_diff)));
  }
}

}  // namespace specchat::ui
