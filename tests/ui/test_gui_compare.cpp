// The compare view: baseline then speculative on the engine thread, the verdict, the speedup
// (decode tokens/s ratio) with the total-time ratio beside it, Save, and the error path when no
// model can be loaded.
#include <catch2/catch.hpp>

#include <QLabel>
#include <QMenu>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/analysis_tools.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/compare_view.h"
#include "ui/live_panel.h"
#include "ui/main_window.h"
#include "ui/prompt_edit.h"
#include "ui/engine_worker.h"

using namespace specchat::ui;
using specchat::test::wait_until;

namespace {

constexpr int kTimeoutMs = 90000;

template <class W>
W* child(QWidget& w, const char* name) {
  W* c = w.findChild<W*>(QString::fromLatin1(name));
  REQUIRE(c != nullptr);
  return c;
}

CompareSide side(std::vector<int32_t> tokens, double total_ms, double decode_ms) {
  CompareSide s;
  s.stats.n_generated = static_cast<int>(tokens.size());
  s.stats.decode_ms = decode_ms;
  s.tokens = std::move(tokens);
  s.total_ms = total_ms;
  return s;
}

}  // namespace

TEST_CASE("gui: compare verdict and speedup from two token streams", "[gui][unit]") {
  CompareResult r;
  r.baseline = side({5, 6, 7, 8}, 400, 300);
  r.speculative = side({5, 6, 7, 8}, 200, 100);
  finish_compare(r);
  CHECK(r.identical);
  CHECK(r.first_diff == -1);
  // The speedup is the decode tokens/s ratio; the total-time ratio (prefill included) is beside it.
  CHECK(r.speedup_decode == Approx((4 / 100.0) / (4 / 300.0)));
  CHECK(r.total_time_ratio == Approx(2.0));
  CHECK(format_speedup_decode(r) == QStringLiteral("speedup (decode) 3.00\u00d7"));
  CHECK(format_total_time_ratio(r) == QStringLiteral("total-time ratio 2.00\u00d7"));
  CHECK(compare_verdict(r) == QStringLiteral("identical tokens"));

  r.speculative = side({5, 6, 9, 8}, 100, 50);
  finish_compare(r);
  CHECK_FALSE(r.identical);
  CHECK(r.first_diff == 2);
  CHECK(compare_verdict(r) == QStringLiteral("first difference at token 2"));

  r.speculative = side({5, 6, 7}, 300, 150);  // a prefix: differs where it ends
  finish_compare(r);
  CHECK(r.first_diff == 3);
  CHECK(r.speedup_decode == Approx((3 / 150.0) / (4 / 300.0)));
  CHECK(r.total_time_ratio == Approx(400.0 / 300.0));

  r.greedy = false;
  CHECK(compare_verdict(r) == QStringLiteral("sampled: outputs may differ, both follow the target distribution"));

  const specchat::CompareRecord rec = to_compare_record(r);
  CHECK_FALSE(rec.identical);
  CHECK(rec.first_diff == 3);
  CHECK(rec.speedup == Approx(r.speedup_decode));
  CHECK(rec.baseline_json.find("\"tokens\":[5,6,7,8]") != std::string::npos);
}

TEST_CASE("gui: compare on the bundled pair is identical for greedy", "[gui][model]") {
  EngineHost host;
  host.loadModels(QString::fromStdString(specchat::test::target_model()),
                  QString::fromStdString(specchat::test::draft_model()));
  CompareView view(host.worker());
  GenerationSettings s;
  s.max_tokens = 16;
  s.draft_k = 4;
  view.setSettings(s);
  view.setConversationId(42);
  view.setPrompt(QStringLiteral("Tell me a short story about a cat."));
  view.show();
  QSignalSpy saved(&view, &CompareView::saveRequested);
  QPushButton* save = child<QPushButton>(view, "compareSaveButton");
  CHECK_FALSE(save->isEnabled());
  QTest::mouseClick(child<QPushButton>(view, "compareRunButton"), Qt::LeftButton);
  CHECK(view.isRunning());
  REQUIRE(wait_until([&] { return view.hasResult(); }, kTimeoutMs));
  const CompareResult& r = view.result();
  INFO(r.error.toStdString());
  REQUIRE(r.error.isEmpty());
  CHECK(r.baseline.stats.n_generated > 0);
  CHECK(r.baseline.tokens == r.speculative.tokens);
  CHECK(r.identical);
  CHECK(r.speculative.stats.n_drafted > 0);
  CHECK(r.baseline.stats.n_drafted == 0);
  CHECK(r.speedup_decode > 0);
  CHECK(r.total_time_ratio > 0);
  CHECK(child<QLabel>(view, "compareVerdict")->text() == QStringLiteral("identical tokens"));
  CHECK(child<QLabel>(view, "compareSpeedup")->text() == format_speedup_decode(r));
  CHECK(child<QLabel>(view, "compareSpeedup")->text().startsWith(QStringLiteral("speedup (decode) ")));
  CHECK(child<QLabel>(view, "compareTotalTimeRatio")->text() == format_total_time_ratio(r));
  CHECK(child<QPlainTextEdit>(view, "compareBaselineText")->toPlainText() == r.baseline.text);
  CHECK(child<QPlainTextEdit>(view, "compareSpeculativeText")->toPlainText() == r.speculative.text);
  CHECK(child<QLabel>(view, "compareBaselineStats")->text().contains(QStringLiteral("TTFT")));

  REQUIRE(save->isEnabled());
  QTest::mouseClick(save, Qt::LeftButton);
  REQUIRE(saved.count() == 1);
  const auto rec = saved.at(0).at(0).value<specchat::CompareRecord>();
  CHECK(rec.identical);
  CHECK(rec.first_diff == -1);
  CHECK(rec.conversation_id == std::optional<int64_t>(42));
  CHECK(rec.prompt == "Tell me a short story about a cat.");
  CHECK(rec.speedup == Approx(r.speedup_decode));
  CHECK_FALSE(save->isEnabled());  // once per run
  CHECK(child<QLabel>(view, "compareStatus")->text() == QStringLiteral("Comparison saved."));

  // Esc stops a running compare; the view is usable again.
  GenerationSettings longer = s;
  longer.max_tokens = 400;
  view.setSettings(longer);
  view.run();
  REQUIRE(view.isRunning());
  QTest::keyClick(child<QPlainTextEdit>(view, "compareInput"), Qt::Key_Escape);
  REQUIRE(wait_until([&] { return !view.isRunning(); }, kTimeoutMs));
  CHECK(view.result().cancelled);
  CHECK(child<QLabel>(view, "compareVerdict")->text() == QStringLiteral("stopped"));
  CHECK(child<QPushButton>(view, "compareRunButton")->isEnabled());
}

TEST_CASE("gui: compare with a missing model shows an error", "[gui]") {
  EngineHost host;
  host.loadModels(QStringLiteral("/nonexistent/missing-model.gguf"), QString());
  CompareView view(host.worker());
  view.setPrompt(QStringLiteral("hello"));
  view.run();
  REQUIRE(wait_until([&] { return view.hasResult(); }, kTimeoutMs));
  CHECK_FALSE(view.result().error.isEmpty());
  CHECK(child<QLabel>(view, "compareVerdict")->text().startsWith(QStringLiteral("error: ")));
  CHECK(child<QLabel>(view, "compareStatus")->text().contains(QStringLiteral("missing-model.gguf")));
  CHECK_FALSE(child<QPushButton>(view, "compareSaveButton")->isEnabled());
  CHECK(child<QPushButton>(view, "compareRunButton")->isEnabled());  // usable again
}

TEST_CASE("gui: the window gets the live panel, the draft toggle and Compare", "[gui]") {
  EngineHost host;
  ChatController controller(host.worker(), QStringLiteral(":memory:"));
  GenerationSettings s;
  s.max_tokens = 12;
  s.draft_k = 3;
  controller.setSettings(s);
  MainWindow window(&controller);
  const AnalysisTools tools = install_analysis_tools(window, host.worker(), &controller);
  window.show();
  QWidget* slot = window.findChild<QWidget*>(QStringLiteral("livePanelSlot"));
  REQUIRE(slot != nullptr);
  CHECK(slot->findChild<LivePanel*>(QStringLiteral("livePanel")) == tools.live_panel);
  CHECK(slot->isVisible());
  QMenu* view = window.findChild<QMenu*>(QStringLiteral("viewMenu"));
  REQUIRE(view != nullptr);
  CHECK(view->actions().contains(tools.compare_action));
  CHECK(view->actions().contains(tools.show_drafts_action));
  CHECK(tools.compare_action->shortcut() == QKeySequence(Qt::CTRL | Qt::Key_K));
  REQUIRE(tools.show_drafts_action != nullptr);
  tools.show_drafts_action->trigger();
  CHECK_FALSE(window.findChild<ChatView*>(QStringLiteral("chatView"))->showDrafts());
  tools.show_live_action->trigger();
  CHECK_FALSE(slot->isVisible());

  CHECK_FALSE(tools.compare->isVisible());
  child<PromptEdit>(window, "promptInput")->setPlainText(QStringLiteral("half-typed prompt"));
  tools.compare_action->trigger();
  CHECK(tools.compare->isVisible());
  CHECK(tools.compare->isWindow());
  CHECK(tools.compare->settings().draft_k == 3);
  CHECK(child<QPlainTextEdit>(*tools.compare, "compareInput")->toPlainText() == QStringLiteral("half-typed prompt"));
}

TEST_CASE("gui: compare while a reply streams waits for it and never replaces the live panel's last reply", "[gui][unit]") {
  // Issue 12, bug 8: a compare run queued behind a chat reply showed "Running baseline…" over
  // empty panes, and its statistics overwrote the live panel's last reply.
  EngineHost host;
  host.loadModels(QStringLiteral("/nonexistent/missing-model.gguf"), QString());
  ChatController controller(host.worker(), QStringLiteral(":memory:"));
  MainWindow window(&controller);
  const AnalysisTools tools = install_analysis_tools(window, host.worker(), &controller);
  LiveStats chat;
  chat.job_id = 7;
  chat.finished = true;
  chat.stats.n_generated = 5;
  Q_EMIT host.worker()->statsUpdated(chat);
  REQUIRE(wait_until([&] { return tools.live_panel->updateCount() == 1; }, 2000));
  LiveStats compare_stats = chat;
  compare_stats.job_id = kCompareJobBit | 1;
  compare_stats.stats.n_generated = 99;
  Q_EMIT host.worker()->statsUpdated(compare_stats);
  QTest::qWait(50);
  CHECK(tools.live_panel->updateCount() == 1);
  CHECK(tools.live_panel->stats().stats.n_generated == 5);

  CompareView& view = *tools.compare;
  view.setChatBusy(true);
  view.setPrompt(QStringLiteral("hello"));
  view.run();
  CHECK(child<QLabel>(view, "compareStatus")->text() == QStringLiteral("Waiting for the current reply to finish\u2026"));
  REQUIRE(wait_until([&] { return view.hasResult(); }, kTimeoutMs));  // the missing model ends it
  view.setChatBusy(false);
  view.run();
  CHECK(child<QLabel>(view, "compareStatus")->text() == QStringLiteral("Running baseline\u2026"));
  REQUIRE(wait_until([&] { return view.hasResult(); }, kTimeoutMs));
}
