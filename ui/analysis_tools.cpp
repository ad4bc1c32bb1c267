#include "ui/analysis_tools.h"

#include <QAction>
#include <QKeySequence>
#include <QPlainTextEdit>

#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/compare_view.h"
#include "ui/engine_worker.h"
#include "ui/live_panel.h"
#include "ui/main_window.h"
#include "ui/piece_rebuilder.h"

namespace specchat::ui {

AnalysisTools install_analysis_tools(MainWindow& window, EngineWorker* worker, ChatController* controller) {
  AnalysisTools t;
  t.live_panel = new LivePanel;
  QObject::connect(worker, &EngineWorker::statsUpdated, t.live_panel, &LivePanel::setStats, Qt::QueuedConnection);
  window.setLivePanel(t.live_panel);

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
  window.addViewAction(t.compare_action);
  return t;
}

}  // namespace specchat::ui
