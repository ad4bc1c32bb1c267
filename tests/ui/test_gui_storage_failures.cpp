// Issue 12, bug 1: a database that cannot be written. A read-only history is announced at start
// (nothing new will be saved), a message whose write failed says so on the message itself, and
// a failed rename leaves the window title and the list agreeing on the stored title.
#include <catch2/catch.hpp>

#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include <sqlite3.h>

#include "storage/conversation_store.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/prompt_edit.h"

using namespace specchat::ui;
using specchat::ConversationStore;
using specchat::test::wait_until;

namespace {

constexpr int kWaitMs = 10000;

// One app on `db` whose engine points at a missing model (a send fails fast, no model needed).
struct App {
  explicit App(const QString& db) : controller(engine.worker(), db), window(&controller) {
    window.show();
    engine.loadModels(QStringLiteral("/nonexistent/specchat-test-model.gguf"), QString());
  }
  void send(const QString& text) {
    auto* input = window.findChild<PromptEdit*>(QStringLiteral("promptInput"));
    REQUIRE(input != nullptr);
    input->setPlainText(text);
    QTest::keyClick(input, Qt::Key_Return);
  }
  QString viewText() { return window.findChild<ChatView*>(QStringLiteral("chatView"))->toPlainText(); }
  EngineHost engine;
  ChatController controller;
  MainWindow window;
};

int64_t make_history(const QString& db, const char* title) {
  ConversationStore store(db.toStdString());
  const int64_t c = store.create_conversation(title);
  specchat::Message m;
  m.conversation_id = c;
  m.role = "user";
  m.text = "an old question";
  store.add_message(m);
  return c;
}

}  // namespace

TEST_CASE("gui storage: a read-only history is announced at start and nothing is silently lost", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("chat.sqlite"));
  const int64_t id = make_history(path, "kept");
  // Root ignores permission bits: a mode=ro URI is a read-only database for every user.
  App app(QStringLiteral("file:%1?mode=ro").arg(path));
  CHECK(app.controller.isReadOnly());
  INFO("status: " << app.controller.statusText().toStdString());
  CHECK(app.controller.statusIsError());
  CHECK(app.controller.statusText().contains(QStringLiteral("read-only")));
  CHECK(app.controller.statusText().contains(QStringLiteral("nothing new will be saved")));
  CHECK(app.window.findChild<QLabel*>(QStringLiteral("errorBanner"))->isVisibleTo(&app.window));
  // The history itself is readable.
  CHECK(app.controller.conversationId() == id);
  CHECK(app.controller.model()->rowCount() == 1);

  app.send(QStringLiteral("a new question"));
  ChatModel* model = app.controller.model();
  REQUIRE(model->rowCount() >= 2);
  CHECK(model->item(1).text == QStringLiteral("a new question"));
  CHECK_FALSE(model->item(1).save_error.isEmpty());
  CHECK(app.viewText().contains(QStringLiteral("Not saved")));

  // Renaming cannot be stored: title and list keep the stored name.
  app.controller.renameConversation(id, QStringLiteral("renamed"));
  app.controller.flushStorage();
  QTest::qWait(50);
  CHECK(app.controller.title() == QStringLiteral("kept"));
  CHECK(app.controller.conversations()->titleAt(0) == QStringLiteral("kept"));
  // Renaming in the list (F2) shows the new name at once; the stored one comes back.
  ConversationListModel* list = app.controller.conversations();
  REQUIRE(list->setData(list->index(0), QStringLiteral("renamed in the list"), Qt::EditRole));
  CHECK(wait_until([&] { return list->titleAt(0) == QStringLiteral("kept"); }, kWaitMs));
  CHECK(app.controller.title() == QStringLiteral("kept"));
}

TEST_CASE("gui storage: a failed write is shown on its message, a failed rename reverts the title", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("chat.sqlite"));
  const int64_t id = make_history(path, "stored title");
  App app(path);
  REQUIRE(app.controller.conversationId() == id);
  CHECK_FALSE(app.controller.isReadOnly());
  {
    // Another connection makes every later write of these kinds fail, as a full disk would.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.toUtf8().constData(), &raw) == SQLITE_OK);
    sqlite3_busy_timeout(raw, 5000);
    REQUIRE(sqlite3_exec(raw,
                         "CREATE TRIGGER no_insert BEFORE INSERT ON messages BEGIN "
                         "SELECT RAISE(ABORT, 'simulated write failure'); END;"
                         "CREATE TRIGGER no_rename BEFORE UPDATE OF title ON conversations BEGIN "
                         "SELECT RAISE(ABORT, 'simulated write failure'); END;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
  }
  app.send(QStringLiteral("will this be kept?"));
  ChatModel* model = app.controller.model();
  REQUIRE(model->rowCount() >= 2);
  REQUIRE(wait_until([&] { return !model->item(1).save_error.isEmpty(); }, kWaitMs));
  CHECK(model->item(1).save_error.contains(QStringLiteral("simulated write failure")));
  CHECK(model->item(1).id == 0);
  CHECK(app.viewText().contains(QStringLiteral("Not saved: ")));
  // The reply ends (its own failed save is queued before the rename below, so its status
  // message cannot land after the rename's: the storage thread answers in order).
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kWaitMs));

  app.controller.renameConversation(id, QStringLiteral("new title"));
  REQUIRE(wait_until([&] { return app.controller.title() == QStringLiteral("stored title"); }, kWaitMs));
  CHECK(app.controller.conversations()->titleAt(0) == QStringLiteral("stored title"));
  CHECK(app.controller.statusText().contains(QStringLiteral("Could not rename")));
}
