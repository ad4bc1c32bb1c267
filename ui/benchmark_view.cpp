// View › Benchmark (see benchmark_view.h).
#include "ui/benchmark_view.h"

#include <QChart>
#include <QChartView>
#include <QComboBox>
#include <QDir>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QShortcut>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "app/cli/bench/charts.h"
#include "app/cli/bench/configs.h"
#include "app/cli/bench/report_files.h"
#include "app/cli/bench/report_html.h"
#include "app/cli/data_files.h"
#include "ui/engine_worker.h"
#include "ui/file_dialogs.h"
#include "ui/storage_worker.h"

namespace specchat::ui {

namespace {

constexpr int kLiveResamples = 200;  // bootstrap resamples while a run fills in (cheap)

QString q(const std::string& s) { return QString::fromStdString(s); }

QString duration_text(double s) {
  const int t = static_cast<int>(std::lround(std::max(0.0, s)));
  return QStringLiteral("%1:%2").arg(t / 60).arg(t % 60, 2, 10, QLatin1Char('0'));
}

// "1,2,4" -> {1, 2, 4}; empty on any part that is not an integer in 1..64.
QList<int> parse_concurrency(const QString& text) {
  QList<int> out;
  for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
    bool ok = false;
    const int c = part.trimmed().toInt(&ok);
    if (!ok || c < 1 || c > 64) return {};
    out << c;
  }
  return out;
}

// The groups the plots compare: categories, or the entropy tiers for a suite with one category.
std::string plot_kind(const bench::Aggregates& agg) {
  std::set<std::string> categories, tiers;
  for (const bench::GroupAggregate& g : agg.groups) {
    if (g.kind == "category") categories.insert(g.group);
    if (g.kind == "tier") tiers.insert(g.group);
  }
  return categories.size() <= 1 && !tiers.empty() ? "tier" : "category";
}

void set_chart(QChartView* view, QChart* chart) {
  QChart* old = view->chart();
  view->setChart(chart);  // the view takes the new chart and lets go of the old one
  delete old;
}

}  // namespace

QTableWidgetItem* BenchmarkView::cell(const QString& text, bool number) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(it->flags() & ~Qt::ItemIsEditable);
  if (number) it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  return it;
}

void BenchmarkView::post(std::function<void(StorageWorker*)> f) {
  StorageWorker* w = storage_;
  QMetaObject::invokeMethod(w, [w, f = std::move(f)] { f(w); }, Qt::QueuedConnection);
}

BenchmarkView::BenchmarkView(EngineWorker* worker, StorageWorker* storage, QWidget* parent)
    : QWidget(parent), worker_(worker), storage_(storage) {
  setWindowTitle(tr("Benchmark"));
  setObjectName(QStringLiteral("benchmarkView"));
  resize(980, 720);
  tabs_ = new QTabWidget;
  tabs_->setObjectName(QStringLiteral("benchTabs"));

  // ---- Run tab ----
  auto* run_tab = new QWidget;
  suite_ = new QComboBox;
  suite_->setObjectName(QStringLiteral("benchSuiteCombo"));
  suite_->addItem(tr("Qualitative: 11 categories (bundled)"), QStringLiteral("qualitative.json"));
  suite_->addItem(tr("Throughput: input lengths \u00d7 entropy tiers (bundled)"), QStringLiteral("throughput.json"));
  suite_->addItem(tr("Choose a suite file\u2026"), QString());
  suite_->setToolTip(tr("The prompts to run (the suite format is in resources/bench/README.md)"));
  connect(suite_, QOverload<int>::of(&QComboBox::activated), this, [this](int i) {
    if (!suite_->itemData(i).toString().isEmpty()) return;
    const QString path = open_file_name(this, tr("Benchmark suite"), QString(), tr("Suites (*.json);;All files (*)"));
    if (!path.isEmpty()) setSuitePath(path);
    else suite_->setCurrentIndex(0);
  });
  per_group_ = new QSpinBox;
  per_group_->setObjectName(QStringLiteral("benchPerGroupSpin"));
  per_group_->setRange(0, 1000);
  per_group_->setValue(2);
  per_group_->setSpecialValueText(tr("all"));
  per_group_->setToolTip(tr("Prompts per category (or per tier and length): the first N of each"));
  configs_ = new QLineEdit(QStringLiteral("baseline,chain:k=4"));
  configs_->setObjectName(QStringLiteral("benchConfigsEdit"));
  configs_->setToolTip(tr("Configurations to compare, comma-separated: baseline, chain:k=4, dynamic:n=16:d=5:b=3, "
                          "optimal:n=16:d=6, ngram:k=4, block:k=7, block-tree:n=16:d=7:b=3, mtp:k=2, mtp-tree:n=10:d=4:b=2"));
  concurrency_ = new QLineEdit(QStringLiteral("1"));
  concurrency_->setObjectName(QStringLiteral("benchConcurrencyEdit"));
  concurrency_->setToolTip(tr("Concurrency levels, comma-separated: how many requests are decoded together"));
  max_tokens_ = new QSpinBox;
  max_tokens_->setObjectName(QStringLiteral("benchMaxTokensSpin"));
  max_tokens_->setRange(1, 4096);
  max_tokens_->setValue(32);
  max_tokens_->setToolTip(tr("Tokens per request at most (less where the context is short)"));
  auto* form = new QFormLayout;
  form->addRow(tr("Suite"), suite_);
  form->addRow(tr("Prompts per group"), per_group_);
  form->addRow(tr("Configurations"), configs_);
  form->addRow(tr("Concurrency"), concurrency_);
  form->addRow(tr("Max tokens"), max_tokens_);

  run_button_ = new QPushButton(tr("Run"));
  run_button_->setObjectName(QStringLiteral("benchRunButton"));
  stop_button_ = new QPushButton(tr("Stop"));
  stop_button_->setObjectName(QStringLiteral("benchStopButton"));
  stop_button_->setEnabled(false);
  stop_button_->setToolTip(tr("Stop after the current wave (Esc)"));
  export_button_ = new QPushButton(tr("Export report\u2026"));
  export_button_->setObjectName(QStringLiteral("benchExportButton"));
  export_button_->setEnabled(false);
  export_button_->setToolTip(tr("report.json, per_request.csv, summary.csv and a self-contained report.html"));
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("benchProgress"));
  progress_->setRange(0, 1);
  progress_->setValue(0);
  eta_ = new QLabel;
  eta_->setObjectName(QStringLiteral("benchEtaLabel"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(run_button_);
  buttons->addWidget(stop_button_);
  buttons->addWidget(progress_, 1);
  buttons->addWidget(eta_);
  buttons->addWidget(export_button_);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("benchStatusLabel"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  speedup_chart_ = new QChartView;
  speedup_chart_->setObjectName(QStringLiteral("benchSpeedupChart"));
  speedup_chart_->setRenderHint(QPainter::Antialiasing);
  speedup_chart_->setMinimumHeight(220);
  tau_chart_ = new QChartView;
  tau_chart_->setObjectName(QStringLiteral("benchTauChart"));
  tau_chart_->setRenderHint(QPainter::Antialiasing);
  tau_chart_->setMinimumHeight(220);
  auto* charts = new QHBoxLayout;
  charts->addWidget(speedup_chart_);
  charts->addWidget(tau_chart_);
  summary_ = new QTableWidget(0, 10);
  summary_->setObjectName(QStringLiteral("benchSummaryTable"));
  summary_->setHorizontalHeaderLabels({tr("Configuration"), tr("Conc."), tr("Group"), tr("Requests"), tr("\u03c4"),
                                       tr("\u03b1"), tr("Speedup [95% CI]"), tr("TTFT p50"), tr("TPOT p50"),
                                       tr("Failures")});
  summary_->horizontalHeaderItem(4)->setToolTip(tr("\u03c4: tokens per target verification step"));
  summary_->horizontalHeaderItem(5)->setToolTip(tr("\u03b1: accepted draft tokens / drafted tokens"));
  summary_->horizontalHeaderItem(9)->setToolTip(tr("Requests whose output differs from baseline's, or that failed: "
                                                   "left out of every figure"));
  summary_->verticalHeader()->hide();
  summary_->horizontalHeader()->setStretchLastSection(true);
  auto* charts_box = new QWidget;
  charts_box->setLayout(charts);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(charts_box);
  split->addWidget(summary_);
  auto* run_layout = new QVBoxLayout(run_tab);
  run_layout->addLayout(form);
  run_layout->addLayout(buttons);
  run_layout->addWidget(status_);
  run_layout->addWidget(split, 1);
  tabs_->addTab(run_tab, tr("Run"));

  // ---- Saved runs tab ----
  auto* saved_tab = new QWidget;
  saved_ = new QListWidget;
  saved_->setObjectName(QStringLiteral("benchSavedList"));
  open_button_ = new QPushButton(tr("Open"));
  open_button_->setObjectName(QStringLiteral("benchOpenButton"));
  delete_button_ = new QPushButton(tr("Delete"));
  delete_button_->setObjectName(QStringLiteral("benchDeleteButton"));
  diff_button_ = new QPushButton(tr("Compare two runs"));
  diff_button_->setObjectName(QStringLiteral("benchDiffButton"));
  diff_button_->setToolTip(tr("Select two runs (Ctrl+click): the first selected is A, the reference"));
  saved_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  auto* saved_buttons = new QHBoxLayout;
  saved_buttons->addWidget(open_button_);
  saved_buttons->addWidget(delete_button_);
  saved_buttons->addWidget(diff_button_);
  saved_buttons->addStretch(1);
  diff_ = new QTableWidget(0, 9);
  diff_->setObjectName(QStringLiteral("benchDiffTable"));
  diff_->setHorizontalHeaderLabels({tr("Configuration"), tr("Conc."), tr("Group"), tr("tok/s A"), tr("tok/s B"),
                                    tr("Change [95% CI]"), tr("Significant"), tr("τ A → B"),
                                    tr("Speedup A → B")});
  diff_->horizontalHeaderItem(6)->setToolTip(tr("The 95% CI of the change excludes 0"));
  diff_->verticalHeader()->hide();
  auto* saved_split = new QSplitter(Qt::Vertical);
  saved_split->addWidget(saved_);
  saved_split->addWidget(diff_);
  auto* saved_layout = new QVBoxLayout(saved_tab);
  saved_layout->addWidget(saved_split, 1);
  saved_layout->addLayout(saved_buttons);
  tabs_->addTab(saved_tab, tr("Saved runs"));

  // ---- Compare runs tab ----
  compare_ = new QTableWidget(0, 5);
  compare_->setObjectName(QStringLiteral("benchCompareTable"));
  compare_->setHorizontalHeaderLabels(
      {tr("Date"), tr("Prompt"), tr("Speedup (decode)"), tr("Total-time ratio"), tr("Output")});
  compare_->verticalHeader()->hide();
  compare_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  tabs_->addTab(compare_, tr("Compare runs"));

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(tabs_);

  connect(run_button_, &QPushButton::clicked, this, [this] { start(); });
  connect(stop_button_, &QPushButton::clicked, this, &BenchmarkView::stop);
  connect(new QShortcut(QKeySequence(Qt::Key_Escape), this), &QShortcut::activated, this, &BenchmarkView::stop);
  connect(export_button_, &QPushButton::clicked, this, [this] {
    const QString dir = existing_directory(this, tr("Export the report into"), QString());
    if (!dir.isEmpty()) exportReport(dir);
  });
  auto open_selected = [this] {
    if (QListWidgetItem* it = saved_->currentItem()) openSavedRun(it->data(Qt::UserRole).toLongLong());
  };
  connect(open_button_, &QPushButton::clicked, this, open_selected);
  connect(saved_, &QListWidget::itemActivated, this, open_selected);
  connect(diff_button_, &QPushButton::clicked, this, [this] {
    const QList<QListWidgetItem*> picked = saved_->selectedItems();
    if (picked.size() != 2) {
      setStatus(tr("Select two saved runs to compare (Ctrl+click)."), true);
      return;
    }
    diffSavedRuns(picked[0]->data(Qt::UserRole).toLongLong(), picked[1]->data(Qt::UserRole).toLongLong());
  });
  connect(delete_button_, &QPushButton::clicked, this, [this] {
    if (QListWidgetItem* it = saved_->currentItem())
      post([id = it->data(Qt::UserRole).toLongLong()](StorageWorker* w) { w->deleteBenchRun(id); });
  });

  connect(worker_, &EngineWorker::benchProgress, this, &BenchmarkView::onProgress, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::benchUpdated, this, &BenchmarkView::onUpdated, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::benchFinished, this, &BenchmarkView::onFinished, Qt::QueuedConnection);
  connect(storage_, &StorageWorker::benchRunsListed, this, &BenchmarkView::onRunsListed, Qt::QueuedConnection);
  connect(storage_, &StorageWorker::benchRunLoaded, this, &BenchmarkView::onRunLoaded, Qt::QueuedConnection);
  connect(storage_, &StorageWorker::compareRunsListed, this, &BenchmarkView::onCompareRunsListed,
          Qt::QueuedConnection);
  connect(storage_, &StorageWorker::benchRunSaved, this,
          [this](qint64 id) {
            setStatus(status_->text() + tr(" Saved."));
            Q_EMIT runSaved(id);
          },
          Qt::QueuedConnection);
  connect(storage_, &StorageWorker::benchStorageFailed, this, [this](const QString& what) { setStatus(what, true); },
          Qt::QueuedConnection);
  showRun(run_, kLiveResamples);  // empty axes rather than blank boxes
  setStatus(tr("Runs on this computer's engine with the chat's models; chat replies wait while it runs."));
}

void BenchmarkView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refreshSaved();
}

void BenchmarkView::refreshSaved() {
  post([](StorageWorker* w) {
    w->listBenchRuns();
    w->listCompareRuns();
  });
}

QString BenchmarkView::statusText() const { return status_->text(); }

void BenchmarkView::setStatus(const QString& text, bool error) {
  status_->setText(text);
  status_->setStyleSheet(error ? QStringLiteral("color: #c0392b;") : QString());
}

void BenchmarkView::setSuitePath(const QString& path) {
  int at = suite_->findData(path);
  if (at < 0) {
    suite_->insertItem(suite_->count() - 1, QDir::toNativeSeparators(path), path);
    at = suite_->findData(path);
  }
  suite_->setCurrentIndex(at);
}

QString BenchmarkView::suitePath() {
  const QString data = suite_->currentData().toString();
  if (data == QLatin1String("qualitative.json") || data == QLatin1String("throughput.json"))
    return QString::fromStdString(cli::bundled_data_file(data.toStdString()));
  return data;
}

void BenchmarkView::setRunning(quint64 job) {
  running_ = job;
  run_button_->setEnabled(job == 0);
  stop_button_->setEnabled(job != 0);
  for (QWidget* w : std::initializer_list<QWidget*>{suite_, per_group_, configs_, concurrency_, max_tokens_})
    w->setEnabled(job == 0);
  export_button_->setEnabled(job == 0 && !run_.records.empty());
}

bool BenchmarkView::start() {
  if (running_ != 0) return false;
  BenchJob job;
  try {
    job.suite_path = suitePath();
    bench::parse_configs(configs_->text().toStdString());  // refused here, before any model loads
  } catch (const std::exception& e) {
    setStatus(QString::fromStdString(e.what()), true);
    return false;
  }
  if (job.suite_path.isEmpty()) {
    setStatus(tr("Choose a suite file first."), true);
    return false;
  }
  job.concurrency = parse_concurrency(concurrency_->text());
  if (job.concurrency.isEmpty()) {
    setStatus(tr("Concurrency: comma-separated whole numbers from 1 to 64, e.g. 1,2,4."), true);
    return false;
  }
  job.id = kBenchJobBit | ++next_job_;
  job.configs = configs_->text();
  job.per_group = per_group_->value();
  job.max_tokens = max_tokens_->value();
  run_ = bench::BenchRun{};
  skipped_.clear();
  showRun(run_, kLiveResamples);
  progress_->setRange(0, 0);  // busy until the first count arrives
  eta_->clear();
  setRunning(job.id);
  setStatus(tr("Loading the models for the benchmark\u2026"));
  QMetaObject::invokeMethod(worker_, [w = worker_, job] { w->runBench(job); }, Qt::QueuedConnection);
  return true;
}

void BenchmarkView::stop() {
  if (running_ == 0) return;
  worker_->stop(running_);
  setStatus(tr("Stopping after the current wave\u2026"));
}

void BenchmarkView::onProgress(quint64 job, qint64 done, qint64 total, double elapsed_s) {
  if (job != running_ || total <= 0) return;
  progress_->setRange(0, static_cast<int>(total));
  progress_->setValue(static_cast<int>(done));
  if (done > 0) {
    const double left = elapsed_s * static_cast<double>(total - done) / static_cast<double>(done);
    eta_->setText(tr("%1/%2 requests \u00b7 %3 left").arg(done).arg(total).arg(duration_text(left)));
  }
  if (!status_->text().startsWith(tr("Stopping"))) setStatus(tr("Running\u2026"));
}

void BenchmarkView::onUpdated(quint64 job, const bench::BenchRun& so_far) {
  if (job != running_) return;
  showRun(so_far, kLiveResamples);
}

void BenchmarkView::onFinished(const BenchResult& r) {
  if (r.job_id != running_) return;
  progress_->setRange(0, 1);
  progress_->setValue(r.error.isEmpty() ? 1 : 0);
  if (!r.error.isEmpty()) {
    setRunning(0);
    setStatus(tr("The benchmark did not run: %1").arg(r.error), true);
    return;
  }
  skipped_ = r.skipped;
  showRun(r.run, kFinalResamples);
  setRunning(0);
  QString text = tr("%1 requests").arg(run_.records.size());
  if (run_.meta.truncated) text += tr(" (stopped early)");
  if (agg_.failures > 0)
    text += tr(", %1 FAILED: their output differs from baseline's or they failed (left out of the figures)")
                .arg(agg_.failures);
  if (!skipped_.empty()) text += tr(", %1 prompts skipped (too long for the context)").arg(skipped_.size());
  if (!r.warnings.isEmpty()) text += QStringLiteral(" \u00b7 ") + r.warnings.join(QStringLiteral("; "));
  setStatus(text + QLatin1Char('.'), agg_.failures > 0);
  Q_EMIT runShown();
  if (run_.records.empty()) return;
  BenchRunRecord rec;
  rec.title = QStringLiteral("%1 \u00b7 %2 \u00b7 c=%3")
                  .arg(q(run_.meta.suite_name), configs_->text(), concurrency_->text())
                  .toStdString();
  rec.suite = run_.meta.suite_name;
  rec.n_records = static_cast<int64_t>(run_.records.size());
  rec.failures = agg_.failures;
  rec.report_json = bench::report_json(run_, agg_, skipped_).dump();
  post([rec](StorageWorker* w) { w->saveBenchRun(rec); });
}

void BenchmarkView::showRun(const bench::BenchRun& run, int resamples) {
  run_ = run;
  agg_ = bench::aggregate(run_, {resamples, 1});
  const std::string kind = plot_kind(agg_);
  std::vector<std::string> groups;
  std::map<std::string, std::map<std::string, const bench::GroupAggregate*>> by_series;  // series -> group
  for (const bench::GroupAggregate& g : agg_.groups) {
    if (g.kind != kind) continue;
    if (std::find(groups.begin(), groups.end(), g.group) == groups.end()) groups.push_back(g.group);
    if (g.config != "baseline") by_series[g.config + " @" + std::to_string(g.concurrency)][g.group] = &g;
  }
  std::vector<bench::ChartSeries> speedup, tau;
  for (const auto& [name, per_group] : by_series) {
    bench::ChartSeries s{name, {}}, t{name, {}};
    for (const std::string& grp : groups) {
      const auto it = per_group.find(grp);
      s.values.push_back(it != per_group.end() && it->second->requests > 0 ? it->second->speedup.mean : NAN);
      t.values.push_back(it != per_group.end() && it->second->requests > 0 ? it->second->tau : NAN);
    }
    speedup.push_back(std::move(s));
    tau.push_back(std::move(t));
  }
  const std::string per = kind == "tier" ? "entropy tier" : "category";
  set_chart(speedup_chart_, bench::bar_chart("Speedup over baseline by " + per, groups, speedup, "\u00d7 baseline"));
  set_chart(tau_chart_, bench::bar_chart("\u03c4 by " + per, groups, tau, "tokens per step"));

  summary_->setRowCount(0);
  for (const bench::GroupAggregate& g : agg_.groups) {
    if (g.kind != "all" && g.kind != "category" && g.kind != "tier") continue;
    const int row = summary_->rowCount();
    summary_->insertRow(row);
    const bool base = g.config == "baseline";
    summary_->setItem(row, 0, cell(q(g.config)));
    summary_->setItem(row, 1, cell(QString::number(g.concurrency), true));
    summary_->setItem(row, 2, cell(q(g.group)));
    summary_->setItem(row, 3, cell(QString::number(g.requests), true));
    summary_->setItem(row, 4, cell(QString::number(g.tau, 'f', 2), true));
    summary_->setItem(row, 5, cell(base ? QStringLiteral("\u2013") : QString::number(g.alpha, 'f', 3), true));
    summary_->setItem(row, 6, cell(QStringLiteral("%1\u00d7 [%2, %3]")
                                       .arg(g.speedup.mean, 0, 'f', 2)
                                       .arg(g.speedup_ci.lo, 0, 'f', 2)
                                       .arg(g.speedup_ci.hi, 0, 'f', 2),
                                   true));
    summary_->setItem(row, 7, cell(QStringLiteral("%1 ms").arg(g.ttft_ms.p50, 0, 'f', 1), true));
    summary_->setItem(row, 8, cell(QStringLiteral("%1 ms").arg(g.tpot_ms.p50, 0, 'f', 2), true));
    summary_->setItem(row, 9, cell(QString::number(g.failures), true));
  }
  summary_->resizeColumnsToContents();
  export_button_->setEnabled(running_ == 0 && !run_.records.empty());
}

bool BenchmarkView::exportReport(const QString& dir) {
  if (run_.records.empty()) {
    setStatus(tr("Nothing to export: run a benchmark or open a saved one."), true);
    return false;
  }
  try {
    if (!QDir().mkpath(dir)) throw std::runtime_error("cannot create the folder " + dir.toStdString());
    const bench::Aggregates agg = bench::aggregate(run_, {kFinalResamples, 1});
    const std::string d = QDir(dir).absolutePath().toStdString() + "/";
    bench::write_text_file(d + "report.json", bench::report_json(run_, agg, skipped_).dump(1) + "\n");
    bench::write_text_file(d + "per_request.csv", bench::per_request_csv(run_));
    bench::write_text_file(d + "summary.csv", bench::summary_csv(agg));
    bench::write_text_file(d + "report.html", bench::report_html(run_, agg, skipped_));
  } catch (const std::exception& e) {
    setStatus(tr("Could not export the report: %1").arg(QString::fromStdString(e.what())), true);
    return false;
  }
  setStatus(tr("Wrote report.json, per_request.csv, summary.csv and report.html to %1.").arg(QDir::toNativeSeparators(dir)));
  return true;
}

}  // namespace specchat::ui
