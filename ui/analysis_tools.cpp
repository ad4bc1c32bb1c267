#include "ui/analysis_tools.h"

#include <QAction>
#include <QKeySequence>
#include <QPlainTextEdit>
#include <QScrollArea>
#include <QScrollBar>

#include "ui/benchmark_view.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/compare_view.h"
#include "ui/context_meter.h"
#include "ui/prompt_edit.h"
#include "ui/engine_worker.h"
#include "ui/live_panel.h"
#include "ui/main_window.h"
#include "ui/piece_rebuilder.h"

namespace specchat::ui {

AnalysisTools install_analysis_tools(MainWindow& window, EngineWorker* worker, ChatController* controller) {
  AnalysisTools t;
  t.live_panel = new LivePanel;
  // The live panel is the chat's: a compare run's statistics show in the compare window and
  // must not replace the panel's last reply.
  QObject::connect(
      worker, &EngineWorker::statsUpdated, t.live_panel,
      [panel = t.live_panel](const LiveStats& s) {
        if (!is_compare_job(s.job_id)) panel->setStats(s);
      },
      Qt::QueuedConnection);
  // The selected conversation's last reply (from its stored record), also after a restart.
  QObject::connect(controller, &ChatController::lastReplyStats, t.live_panel,
                   [panel = t.live_panel](bool found, const LiveStats& s) {
                     if (found) {
                       panel->setStats(s);
                     } else {
                       panel->clear();
                     }
                   });
  // At a small window size the panel scrolls instead of squeezing its rows over each other.
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("livePanelScroll"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setWidget(t.live_panel);
  scroll->setMinimumWidth(t.live_panel->minimumSizeHint().width() + scroll->verticalScrollBar()->sizeHint().width());
  window.setLivePanel(scroll);

  t.show_live_action = new QAction(QObject::tr("&Live panel"), &window);
  t.show_live_action->setObjectName(QStringLiteral("showLivePanelAction"));
  t.show_live_action->setCheckable(true);
  t.show_live_action->setChecked(true);
  QWidget* slot = window.findChild<QWidget*>(QStringLiteral("livePanelSlot"));
  QObject::connect(t.show_live_action, &QAction::toggled, &window, [slot, panel = t.live_panel](bool on) {
    (slot ? slot : static_cast<QWidget*>(panel))->setVisible(on);
  });
  window.addViewAction(t.show_live_action);

  // Replies reloaded from the database get their drafted / target pieces back.
  new PieceRebuilder(controller->model(), worker, &window);

  if (auto* view = window.findChild<ChatView*>(QStringLiteral("chatView"))) {
    t.show_drafts_action = view->showDraftsAction();
    window.addViewAction(t.show_drafts_action);
  }

  t.compare = new CompareView(worker, &window);
  t.compare->setWindowFlag(Qt::Window);
  t.compare_action = new QAction(QObject::tr("&Compare\u2026"), &window);
  t.compare_action->setObjectName(QStringLiteral("compareAction"));
  t.compare_action->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
  t.compare_action->setToolTip(QObject::tr("Run one prompt baseline and speculative, side by side"));
  QObject::connect(t.compare_action, &QAction::triggered, &window, [&window, compare = t.compare, controller] {
    compare->setSettings(controller->settings());
    compare->setChatBusy(controller->isBusy());
    compare->setSystemPrompt(controller->systemPrompt());
    compare->setConversationId(controller->conversationId() > 0 ? controller->conversationId() : 0);
    auto* input = compare->findChild<QPlainTextEdit*>(QStringLiteral("compareInput"));
    if (input && input->toPlainText().trimmed().isEmpty()) {
      // Start from what the user is typing in the chat, if anything.
      if (auto* prompt = window.findChild<QPlainTextEdit*>(QStringLiteral("promptInput"))) {
        compare->setPrompt(prompt->toPlainText());
      }
    }
    compare->show();
    compare->raise();
    compare->activateWindow();
  });
  QObject::connect(controller, &ChatController::busyChanged, t.compare, &CompareView::setChatBusy);
  window.addViewAction(t.compare_action);

  t.benchmark = new BenchmarkView(worker, controller->storageWorker(), &window);
  t.benchmark->setWindowFlag(Qt::Window);
  t.benchmark_action = new QAction(QObject::tr("&Benchmark…"), &window);
  t.benchmark_action->setObjectName(QStringLiteral("benchmarkAction"));
  t.benchmark_action->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_B));
  t.benchmark_action->setToolTip(QObject::tr("Run a prompt suite baseline and speculative: speedup, τ and α by category"));
  QObject::connect(t.benchmark_action, &QAction::triggered, &window, [bench = t.benchmark] {
    bench->show();
    bench->raise();
    bench->activateWindow();
  });
  window.addViewAction(t.benchmark_action);

  auto* input = window.findChild<PromptEdit*>(QStringLiteral("promptInput"));
  auto* chat = window.findChild<ChatView*>(QStringLiteral("chatView"));
  if (input && chat) {
    t.context_meter = new ContextMeter(controller, worker, input, chat);
    window.setContextMeter(t.context_meter);
  }
  return t;
}

}  // namespace specchat::ui
