// View › Benchmark (issue 15, ui/benchmark_view.h): a tiny suite runs on the engine thread with
// progress, fills the plots and the table, is saved to the database, reopens from the saved
// runs after a restart, and exports the CLI's report files; saved compare runs are listed; bad
// input is refused before any model loads.
#include <catch2/catch.hpp>

#include <QAction>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>

#include "app/cli/bench/report_files.h"
#include "storage/conversation_store.h"
#include "tests/ui/gui_model_app.h"
#include "ui/analysis_tools.h"
#include "ui/benchmark_view.h"

using namespace specchat;
using namespace specchat::ui;
using specchat::test::wait_until;

namespace {

constexpr int kRunTimeoutMs = 240000;

// A suite of its own: two categories, two prompts each (a qualitative suite's schema).
QString write_suite(const QTemporaryDir& dir) {
  const QString path = dir.filePath(QStringLiteral("tiny.json"));
  QFile f(path);
  REQUIRE(f.open(QIODevice::WriteOnly));
  f.write(R"({"format": "specchat-bench-suite", "version": 1, "name": "tiny", "prompt_format": "chat", "prompts": [
    {"id": "w1", "category": "writing", "turns": ["Tell me a story about a dog."], "source": "test"},
    {"id": "w2", "category": "writing", "turns": ["Tell me a story about a cat."], "source": "test"},
    {"id": "m1", "category": "math", "turns": ["What is 12 + 7?"], "source": "test"},
    {"id": "m2", "category": "math", "turns": ["Tom has 3 apples and buys 4 more. How many?"], "source": "test"}]})");
  return path;
}

}  // namespace

TEST_CASE("gui benchmark: a tiny suite runs, fills the plots, is saved, reopens after a restart, exports its report", "[gui][model]") {
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  const QString suite = write_suite(dir);
  {
    // A saved compare run, to be listed in the view.
    ConversationStore s(db.toStdString());
    CompareRecord r;
    r.prompt = "Tell me a story";
    r.speedup = 1.25;
    r.total_time_ratio = 1.2;
    r.identical = true;
    s.save_compare_run(r);
  }
  GenerationSettings settings;
  qint64 saved_id = 0;
  size_t n_records = 0;
  {
    test::ModelApp app(db, settings);
    const AnalysisTools tools = install_analysis_tools(app.window, app.engine.worker(), &app.controller);
    REQUIRE(tools.benchmark_action);
    CHECK(tools.benchmark_action->objectName() == QStringLiteral("benchmarkAction"));
    tools.benchmark_action->trigger();
    BenchmarkView* v = tools.benchmark;
    REQUIRE(v->isVisible());
    auto* compare = v->findChild<QTableWidget*>(QStringLiteral("benchCompareTable"));
    REQUIRE(wait_until([&] { return compare->rowCount() == 1; }, 10000));
    CHECK(compare->item(0, 2)->text() == QStringLiteral("1.25\u00d7"));
    CHECK(compare->item(0, 4)->text() == QStringLiteral("identical"));

    // Bad input is refused before anything runs.
    v->findChild<QLineEdit*>(QStringLiteral("benchConfigsEdit"))->setText(QStringLiteral("baseline,chain:k=999"));
    CHECK_FALSE(v->start());
    CHECK(v->statusText().contains(QStringLiteral("999")));
    v->findChild<QLineEdit*>(QStringLiteral("benchConfigsEdit"))->setText(QStringLiteral("baseline,chain:k=3"));
    v->findChild<QLineEdit*>(QStringLiteral("benchConcurrencyEdit"))->setText(QStringLiteral("1,x"));
    CHECK_FALSE(v->start());
    CHECK(v->statusText().contains(QStringLiteral("Concurrency")));

    v->findChild<QLineEdit*>(QStringLiteral("benchConcurrencyEdit"))->setText(QStringLiteral("1,2"));
    v->findChild<QSpinBox*>(QStringLiteral("benchMaxTokensSpin"))->setValue(12);
    v->findChild<QSpinBox*>(QStringLiteral("benchPerGroupSpin"))->setValue(0);  // all four prompts
    v->setSuitePath(suite);
    QSignalSpy saved(v, &BenchmarkView::runSaved);
    REQUIRE(v->start());
    CHECK(v->isRunning());
    CHECK_FALSE(v->start());  // one at a time
    REQUIRE(wait_until([&] { return !v->isRunning(); }, kRunTimeoutMs));
    INFO(v->statusText().toStdString());
    // 4 prompts x 2 configurations x 2 concurrency levels, every speculative output identical.
    const bench::BenchRun& run = v->shownRun();
    n_records = run.records.size();
    CHECK(n_records == 16);
    CHECK(v->shownAggregates().failures == 0);
    CHECK(run.meta.suite_name == "tiny");
    auto* progress = v->findChild<QProgressBar*>(QStringLiteral("benchProgress"));
    CHECK(progress->value() == progress->maximum());
    // The plots: one bar series per speculative configuration and concurrency, two categories.
    QChart* chart = v->findChild<QChartView*>(QStringLiteral("benchSpeedupChart"))->chart();
    REQUIRE(chart);
    REQUIRE(chart->series().size() == 1);
    CHECK(chart->title().contains(QStringLiteral("category")));
    auto* table = v->findChild<QTableWidget*>(QStringLiteral("benchSummaryTable"));
    CHECK(table->rowCount() >= 12);  // (all + 2 categories) x 2 configs x 2 levels
    REQUIRE(wait_until([&] { return saved.count() == 1; }, 10000));
    saved_id = saved.at(0).at(0).toLongLong();

    const QString out = dir.filePath(QStringLiteral("report"));
    REQUIRE(v->exportReport(out));
    for (const char* name : {"report.json", "per_request.csv", "summary.csv", "report.html"})
      CHECK(QFile::exists(QDir(out).filePath(QLatin1String(name))));
    const bench::LoadedReport lr = bench::load_report(QDir(out).filePath(QStringLiteral("report.json")).toStdString());
    CHECK(lr.run.records.size() == n_records);
    QFile html(QDir(out).filePath(QStringLiteral("report.html")));
    REQUIRE(html.open(QIODevice::ReadOnly));
    const QByteArray page = html.readAll();
    CHECK(page.contains("<svg"));
    CHECK_FALSE(page.contains("http://"));
    CHECK_FALSE(page.contains("https://"));
  }
  {
    ConversationStore s(db.toStdString());
    const auto runs = s.bench_runs();
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].id == saved_id);
    CHECK(static_cast<size_t>(runs[0].n_records) == n_records);
  }
  // After a restart the run is in the saved list and reopens with the same records.
  test::ModelApp app(db, settings);
  const AnalysisTools tools = install_analysis_tools(app.window, app.engine.worker(), &app.controller);
  tools.benchmark_action->trigger();
  BenchmarkView* v = tools.benchmark;
  auto* list = v->findChild<QListWidget*>(QStringLiteral("benchSavedList"));
  REQUIRE(wait_until([&] { return list->count() == 1; }, 10000));
  CHECK(list->item(0)->text().contains(QStringLiteral("tiny")));
  QSignalSpy shown(v, &BenchmarkView::runShown);
  v->openSavedRun(saved_id);
  REQUIRE(wait_until([&] { return shown.count() == 1; }, 10000));
  CHECK(v->shownRun().records.size() == n_records);
  CHECK(v->findChild<QChartView*>(QStringLiteral("benchSpeedupChart"))->chart()->series().size() == 1);
  CHECK(v->exportReport(dir.filePath(QStringLiteral("again"))));

  // Two saved runs side by side (here the run against itself: no change, none significant).
  QSignalSpy diffed(v, &BenchmarkView::diffShown);
  v->diffSavedRuns(saved_id, saved_id);
  REQUIRE(wait_until([&] { return diffed.count() == 1; }, 10000));
  auto* diff = v->findChild<QTableWidget*>(QStringLiteral("benchDiffTable"));
  REQUIRE(diff->rowCount() == diffed.at(0).at(0).toInt());
  REQUIRE(diff->rowCount() >= 6);  // speculative and baseline x 2 levels x (all + 2 categories)
  for (int r = 0; r < diff->rowCount(); ++r) {
    CHECK(diff->item(r, 6)->text() == QStringLiteral("no"));
    CHECK(diff->item(r, 3)->text() == diff->item(r, 4)->text());
  }
}

TEST_CASE("gui benchmark: Stop ends a sweep after its current wave, and what ran is kept", "[gui][model]") {
  QTemporaryDir dir;
  GenerationSettings settings;
  test::ModelApp app(dir.filePath(QStringLiteral("chat.sqlite")), settings);
  const AnalysisTools tools = install_analysis_tools(app.window, app.engine.worker(), &app.controller);
  BenchmarkView* v = tools.benchmark;
  v->findChild<QSpinBox*>(QStringLiteral("benchPerGroupSpin"))->setValue(0);  // the whole bundled suite
  v->findChild<QSpinBox*>(QStringLiteral("benchMaxTokensSpin"))->setValue(8);
  auto* progress = v->findChild<QProgressBar*>(QStringLiteral("benchProgress"));
  REQUIRE(v->start());
  REQUIRE(wait_until([&] { return progress->maximum() > 1 && progress->value() > 0; }, kRunTimeoutMs));
  const int total = progress->maximum();
  v->findChild<QPushButton*>(QStringLiteral("benchStopButton"))->click();
  REQUIRE(wait_until([&] { return !v->isRunning(); }, kRunTimeoutMs));
  INFO(v->statusText().toStdString());
  CHECK(v->shownRun().meta.truncated);
  CHECK(v->statusText().contains(QStringLiteral("stopped early")));
  CHECK_FALSE(v->shownRun().records.empty());
  CHECK(static_cast<int>(v->shownRun().records.size()) < total);
  CHECK(v->findChild<QPushButton*>(QStringLiteral("benchRunButton"))->isEnabled());
}
