// Help › Keyboard shortcuts lists what the keys really do (read from the menus), and Edit ›
// Delete conversation deletes the open one with the usual undo window.
#include <catch2/catch.hpp>

#include <QMenuBar>
#include <QTableWidget>
#include <QTemporaryDir>

#include "storage/conversation_store.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/shortcuts_dialog.h"

using namespace specchat::ui;
using specchat::test::wait_until;

TEST_CASE("gui shortcuts: the list holds every menu shortcut and the fixed keys, Delete is in the Edit menu", "[gui][unit]") {
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  {
    specchat::ConversationStore s(db.toStdString());
    s.create_conversation("first");
    s.create_conversation("second");
  }
  EngineHost engine;
  ChatController controller(engine.worker(), db);
  MainWindow window(&controller);
  const QList<QPair<QString, QString>> rows = shortcut_list(window.menuBar());
  auto has = [&](const QKeySequence& keys, const QString& what) {
    for (const auto& [k, w] : rows)
      if (k == keys.toString(QKeySequence::NativeText) && w.contains(what)) return true;
    return false;
  };
  CHECK(has(QKeySequence::New, QStringLiteral("New conversation")));
  CHECK(has(QKeySequence(Qt::CTRL | Qt::Key_R), QStringLiteral("generate last reply")));
  CHECK(has(QKeySequence(Qt::CTRL | Qt::Key_Comma), QStringLiteral("Settings")));
  CHECK(has(QKeySequence(Qt::CTRL | Qt::Key_Slash), QStringLiteral("Keyboard shortcuts")));
  CHECK(has(QKeySequence(Qt::Key_Escape), QStringLiteral("Stop the reply")));
  CHECK(has(QKeySequence(Qt::Key_Return), QStringLiteral("Send")));
  ShortcutsDialog dialog(window.menuBar());
  auto* table = dialog.findChild<QTableWidget*>(QStringLiteral("shortcutsTable"));
  REQUIRE(table != nullptr);
  CHECK(table->rowCount() == rows.size());

  auto* del = window.findChild<QAction*>(QStringLiteral("deleteConversationAction"));
  REQUIRE(del != nullptr);
  const qint64 open = controller.conversationId();
  REQUIRE(open > 0);
  del->trigger();
  CHECK(controller.pendingDeleteId() == open);
  CHECK(wait_until([&] { return controller.conversationId() != open && controller.conversationId() != 0; }, 10000));
}
