// specchat-screenshots: renders what a new user sees — the main window after a streamed reply
// (sidebar, chat with draft-token highlighting, live panel), the live panel alone, the compare
// view after a baseline-vs-speculative run, the Benchmark view after a small sweep, and the
// settings dialog — into PNG files.
// Run by scripts/screenshots under Xvfb (the real xcb platform, not offscreen) on the bundled
// models; it drives the same widgets, controller and engine thread as the app.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

#include <cstdio>

#include "engine/model_pair.h"
#include "ui/analysis_tools.h"
#include "ui/benchmark_view.h"
#include "ui/chat_controller.h"
#include "ui/compare_view.h"
#include "ui/engine_worker.h"
#include "ui/live_panel.h"
#include "ui/main_window.h"
#include "ui/settings.h"
#include "ui/settings_dialog.h"

namespace {

constexpr int kTimeoutMs = 120000;

template <class Pred>
bool wait_until(Pred pred, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!pred()) {
    if (t.elapsed() > timeout_ms) return false;
    QTest::qWait(10);
  }
  return true;
}

bool save(QWidget* w, const QString& dir, const char* name) {
  const QString path = QDir(dir).filePath(QString::fromLatin1(name));
  QTest::qWait(200);  // let the last paint events run
  if (!w->grab().save(path)) {
    std::fprintf(stderr, "specchat-screenshots: cannot write %s\n", qPrintable(path));
    return false;
  }
  std::printf("wrote %s\n", qPrintable(path));
  return true;
}

bool reply(specchat::ui::ChatController& c, const QString& prompt) {
  c.send(prompt);
  if (!wait_until([&] { return !c.isBusy(); }, kTimeoutMs) || c.statusIsError()) {
    std::fprintf(stderr, "specchat-screenshots: no reply to \"%s\": %s\n", qPrintable(prompt),
                 qPrintable(c.statusText()));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("SpecChat"));
  const QString out = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("docs/screenshots");
  QDir().mkpath(out);
  QTemporaryDir tmp;
  if (!tmp.isValid()) return 1;

  using namespace specchat::ui;
  AppSettings settings;  // defaults: bundled pair, greedy, chain k = 4
  settings.generation.max_tokens = 96;
  EngineHost engine;
  engine.worker()->setStatsIntervalMs(0);  // a snapshot per token: a dense sparkline
  ChatController controller(engine.worker(), tmp.filePath(QStringLiteral("chat.sqlite")));
  controller.setSettings(settings.generation);
  MainWindow window(&controller);
  window.setAppSettings(settings, tmp.filePath(QStringLiteral("settings.ini")));
  const AnalysisTools tools = install_analysis_tools(window, engine.worker(), &controller);
  window.resize(1180, 720);
  window.show();
  engine.loadModels(QString::fromStdString(specchat::bundled_target_path()),
                    QString::fromStdString(specchat::bundled_draft_path()));

  // Two earlier conversations for the sidebar, then the one on screen.
  if (!reply(controller, QStringLiteral("Tom has 3 apples and buys 5 more. How many apples does he have?"))) return 1;
  controller.newConversation();
  if (!reply(controller, QStringLiteral("Write a short story for a child."))) return 1;
  controller.newConversation();
  controller.setSystemPrompt(QStringLiteral("You are a friendly storyteller."));
  if (!reply(controller, QStringLiteral("Tell me a story about a dog named Max."))) return 1;

  bool ok = save(&window, out, "main-window.png");
  ok = save(tools.live_panel, out, "live-panel.png") && ok;

  tools.compare->setSettings(settings.generation);
  tools.compare->setPrompt(QStringLiteral("Tell me a story about a dog named Max."));
  tools.compare->resize(1000, 620);
  tools.compare->show();
  tools.compare->run();
  if (!wait_until([&] { return tools.compare->hasResult(); }, kTimeoutMs)) return 1;
  ok = save(tools.compare, out, "compare-view.png") && ok;
  tools.compare->hide();

  // The Benchmark view after a small sweep of the bundled qualitative suite.
  tools.benchmark->resize(1100, 760);
  tools.benchmark->show();
  if (auto* e = tools.benchmark->findChild<QLineEdit*>(QStringLiteral("benchConfigsEdit")))
    e->setText(QStringLiteral("baseline,chain:k=3,dynamic:n=16:d=5:b=3"));
  if (auto* e = tools.benchmark->findChild<QLineEdit*>(QStringLiteral("benchConcurrencyEdit"))) e->setText(QStringLiteral("1"));
  if (auto* s = tools.benchmark->findChild<QSpinBox*>(QStringLiteral("benchMaxTokensSpin"))) s->setValue(32);
  if (!tools.benchmark->start() || !wait_until([&] { return !tools.benchmark->isRunning(); }, 10 * kTimeoutMs) ||
      tools.benchmark->shownRun().records.empty()) {
    std::fprintf(stderr, "specchat-screenshots: the benchmark did not run: %s\n", qPrintable(tools.benchmark->statusText()));
    return 1;
  }
  ok = save(tools.benchmark, out, "benchmark-view.png") && ok;
  tools.benchmark->hide();

  SettingsDialog dialog(settings, &window);
  dialog.show();
  ok = save(&dialog, out, "settings.png") && ok;
  return ok ? 0 : 1;
}
