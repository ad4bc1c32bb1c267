// View › Benchmark (issue 15): the SPEED-Bench-style sweep of `specchat-cli bench --suite` in
// the app. Pick a suite (the bundled qualitative or throughput suite, or a file), the
// configurations (bench::parse_configs syntax), the concurrency levels and the request size; it
// runs on the engine thread (EngineWorker::runBench) with progress, an ETA and Stop, and the
// plots (speedup and τ by category, drawn by Qt Charts like report.html's) and the summary table
// fill in after each wave. A finished run is saved to the database (bench_runs) and can be
// exported as the CLI's report (report.json, per_request.csv, summary.csv, report.html); saved
// runs reopen from the "Saved runs" tab, and the compare view's saved runs are listed in
// "Compare runs".
// Files: benchmark_view.cpp (the form, the run, plots and table, export),
// benchmark_view_saved.cpp (saved runs, compare two, compare runs).
#pragma once

#include <QWidget>

#include <functional>
#include <optional>
#include <vector>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/records.h"
#include "storage/conversation_store.h"
#include "ui/bench_types.h"

class QChartView;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTabWidget;
class QTableWidget;
class QTableWidgetItem;

namespace specchat::ui {

class EngineWorker;
class StorageWorker;

class BenchmarkView : public QWidget {
  Q_OBJECT

 public:
  // `worker` (engine thread) and `storage` (storage thread) must outlive the view. Children have
  // object names: benchTabs, benchSuiteCombo, benchPerGroupSpin, benchConfigsEdit,
  // benchConcurrencyEdit, benchMaxTokensSpin, benchRunButton, benchStopButton, benchProgress,
  // benchEtaLabel, benchStatusLabel, benchSpeedupChart, benchTauChart, benchSummaryTable,
  // benchExportButton, benchSavedList, benchOpenButton, benchDeleteButton, benchDiffButton,
  // benchDiffTable, benchCompareTable.
  BenchmarkView(EngineWorker* worker, StorageWorker* storage, QWidget* parent = nullptr);

  // Adds `path` to the suite choices and selects it.
  void setSuitePath(const QString& path);
  // Starts a sweep with the form's settings (the Run button). Returns false, with the reason on
  // the status line, for a running sweep, a missing suite, bad configurations or concurrency.
  bool start();
  bool isRunning() const { return running_ != 0; }
  // The run on show (live, finished or reopened) and its aggregates (bench::aggregate).
  const bench::BenchRun& shownRun() const { return run_; }
  const bench::Aggregates& shownAggregates() const { return agg_; }
  // Writes the shown run's report.json, per_request.csv, summary.csv and report.html into `dir`
  // (created when missing). Returns false, with the reason on the status line, on failure.
  bool exportReport(const QString& dir);
  // Shows saved run `id` (asynchronous: runShown follows).
  void openSavedRun(qint64 id);
  // Two saved runs side by side (bench::diff_runs, as `specchat-cli bench-diff`): per
  // configuration, concurrency and category, tokens/s per user in A and B, the change with its
  // bootstrap 95% CI, significant when the CI excludes 0 (asynchronous: diffShown follows).
  void diffSavedRuns(qint64 a, qint64 b);
  // Asks the storage thread for the saved benchmark runs and compare runs (when shown).
  void refreshSaved();
  QString statusText() const;

 public Q_SLOTS:
  void stop();  // ends the running sweep after its current wave (the Stop button, Esc)

 Q_SIGNALS:
  void runShown();           // a finished or reopened run is on show
  void runSaved(qint64 id);  // the finished run was stored
  void savedRunsListed(int count);
  void diffShown(int rows);

 protected:
  void showEvent(QShowEvent* e) override;

 private:
  void onProgress(quint64 job, qint64 done, qint64 total, double elapsed_s);
  void onUpdated(quint64 job, const bench::BenchRun& so_far);
  void onFinished(const BenchResult& r);
  void onRunsListed(const std::vector<BenchRunRecord>& runs);
  void onRunLoaded(const BenchRunRecord& r);
  void onCompareRunsListed(const std::vector<CompareRecord>& runs);
  void showRun(const bench::BenchRun& run, int resamples);  // aggregates, plots and table
  void setRunning(quint64 job);
  void setStatus(const QString& text, bool error = false);
  QString suitePath();
  void post(std::function<void(StorageWorker*)> f);  // runs f(storage_) on the storage thread
  static QTableWidgetItem* cell(const QString& text, bool number = false);  // read-only
  static constexpr int kFinalResamples = 1000;  // bootstrap resamples, as the CLI's report

  EngineWorker* worker_;
  StorageWorker* storage_;
  QTabWidget* tabs_;
  QComboBox* suite_;
  QSpinBox* per_group_;
  QLineEdit* configs_;
  QLineEdit* concurrency_;
  QSpinBox* max_tokens_;
  QPushButton* run_button_;
  QPushButton* stop_button_;
  QProgressBar* progress_;
  QLabel* eta_;
  QLabel* status_;
  QChartView* speedup_chart_;
  QChartView* tau_chart_;
  QTableWidget* summary_;
  QPushButton* export_button_;
  QListWidget* saved_;
  QPushButton* open_button_;
  QPushButton* delete_button_;
  QPushButton* diff_button_;
  QTableWidget* diff_;
  QTableWidget* compare_;

  quint64 running_ = 0;
  quint64 next_job_ = 0;
  bench::BenchRun run_;
  bench::Aggregates agg_;
  std::vector<std::string> skipped_;
  // diffSavedRuns: the two ids asked for, and each one's run once loaded.
  qint64 diff_a_ = 0, diff_b_ = 0;
  std::optional<bench::BenchRun> diff_run_a_, diff_run_b_;
  void showDiff();
};

}  // namespace specchat::ui
