// GUI tests of conversations: the sidebar list (new, rename, delete with undo, search, reopen
// after a restart), the system prompt in the context, export files and the JSON round trip, the
// inline error when no model can be loaded, and (with the bundled models) send, stream, stop and
// regenerate. Storage runs on its own thread, so the tests wait for results instead of assuming
// them synchronous.
#include <catch2/catch.hpp>

#include <QApplication>
#include <QClipboard>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <optional>

#include "storage/conversation_store.h"
#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/prompt_edit.h"
#include "ui/sidebar.h"

using namespace specchat::ui;
using specchat::Conversation;
using specchat::ConversationStore;
using specchat::Message;
using specchat::test::wait_until;

namespace {

constexpr int kWaitMs = 10000;
constexpr int kReplyTimeoutMs = 60000;

// One running app on `db`. Without `load`, the engine is pointed at a missing file so a send
// fails quickly instead of lazily loading the bundled model.
struct App {
  explicit App(const QString& db, bool load_bundled = false)
      : controller(engine.worker(), db), window(&controller) {
    GenerationSettings s;
    s.max_tokens = 12;  // the machine is slow: short replies
    controller.setSettings(s);
    window.show();
    // Window shortcuts (Ctrl+N, Ctrl+F, Esc) only fire in the active window.
    window.activateWindow();
    (void)QTest::qWaitForWindowActive(&window);
    if (load_bundled) {
      engine.loadModels(QString::fromStdString(specchat::test::target_model()),
                        QString::fromStdString(specchat::test::draft_model()));
    } else {
      engine.loadModels(db + QStringLiteral(".no-such-model.gguf"), QString());
    }
  }
  template <class W>
  W* child(const char* name) {
    W* w = window.findChild<W*>(QString::fromLatin1(name));
    REQUIRE(w != nullptr);
    return w;
  }
  QStringList listTitles() {
    QStringList out;
    ConversationListModel* m = controller.conversations();
    for (int r = 0; r < m->rowCount(); ++r) out << m->titleAt(r);
    return out;
  }
  void type_and_send(const QString& text) {
    PromptEdit* input = child<PromptEdit>("promptInput");
    input->setFocus();
    QTest::keyClicks(input, text);
    QTest::keyClick(input, Qt::Key_Return);
  }
  EngineHost engine;
  ChatController controller;
  MainWindow window;
};

Message msg(int64_t conv, const char* role, const char* text, std::vector<int32_t> ids = {}) {
  Message m;
  m.conversation_id = conv;
  m.role = role;
  m.text = text;
  m.token_ids = std::move(ids);
  if (m.role == "assistant") {
    m.drafted.assign(m.token_ids.size(), 0);
    if (!m.drafted.empty()) m.drafted[0] = 1;
    m.tokenizer_hash = 0x1234567890abcdefULL;
    m.template_name = "specchat";
    m.stats.mode = "speculative";
    m.stats.n_tokens = static_cast<int>(m.token_ids.size());
    m.stats.tokens_per_s = 12.5;
  }
  return m;
}

QString read_all(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

}  // namespace

TEST_CASE("gui conversations: new, rename, search, delete with undo, reopen after restart", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t alpha = 0, beta = 0;
  {
    ConversationStore store(db.toStdString());
    alpha = store.create_conversation("Alpha trip");
    store.add_message(msg(alpha, "user", "pack the tent"));
    store.add_message(msg(alpha, "assistant", "and the stove", {5, 6, 7}));
    beta = store.create_conversation("Beta recipes");
    store.add_message(msg(beta, "user", "bake some bread"));
  }

  qint64 fresh = 0;
  {
    App app(db);
    // Newest first; the newest conversation is open.
    CHECK(app.listTitles() == QStringList({QStringLiteral("Beta recipes"), QStringLiteral("Alpha trip")}));
    CHECK(app.controller.conversationId() == beta);
    REQUIRE(app.controller.model()->rowCount() == 1);
    CHECK(app.controller.model()->item(0).text == QStringLiteral("bake some bread"));
    auto* list = app.child<QListView>("conversationList");
    CHECK(list->currentIndex().row() == 0);

    // Switching loads the other conversation's active messages.
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualRect(list->model()->index(1, 0)).center());
    REQUIRE(wait_until([&] { return app.controller.model()->rowCount() == 2; }, kWaitMs));
    CHECK(app.controller.conversationId() == alpha);
    CHECK(app.controller.model()->item(1).text == QStringLiteral("and the stove"));
    CHECK(app.window.windowTitle().startsWith(QStringLiteral("Alpha trip")));

    // Copy (chat context menu / Edit menu) puts a message's text on the clipboard.
    app.window.copyMessage(1);
    CHECK(QApplication::clipboard()->text() == QStringLiteral("and the stove"));

    // F2 renames the selected conversation in place.
    REQUIRE(list->currentIndex().row() == 1);
    list->setFocus();
    QTest::keyClick(list, Qt::Key_F2);
    REQUIRE(wait_until([&] { return list->findChild<QLineEdit*>() != nullptr && list->findChild<QLineEdit*>()->isVisible(); }, 2000));
    auto* editor = list->findChild<QLineEdit*>();
    editor->selectAll();
    QTest::keyClicks(editor, QStringLiteral("Alpha camping"));
    QTest::keyClick(editor, Qt::Key_Return);
    // The delegate commits through a queued call.
    CHECK(wait_until([&] { return app.controller.title() == QStringLiteral("Alpha camping"); }, 2000));
    app.controller.flushStorage();
    REQUIRE(wait_until([&] { return app.listTitles().contains(QStringLiteral("Alpha camping")); }, kWaitMs));
    app.controller.renameConversation(alpha, QStringLiteral("Alpha trip"));
    app.controller.flushStorage();
    REQUIRE(wait_until([&] { return app.listTitles().contains(QStringLiteral("Alpha trip")); }, kWaitMs));

    // Ctrl+N: a new, empty conversation at the top of the list.
    QTest::keyClick(&app.window, Qt::Key_N, Qt::ControlModifier);
    CHECK(app.controller.model()->rowCount() == 0);
    REQUIRE(wait_until([&] { return app.controller.conversationId() > 0 && app.listTitles().size() == 3; }, kWaitMs));
    fresh = app.controller.conversationId();
    CHECK(app.listTitles().front() == QStringLiteral("New chat"));

    // Rename through the list (what F2 / double-click edit does).
    ConversationListModel* convs = app.controller.conversations();
    REQUIRE(convs->setData(convs->index(convs->rowOf(fresh)), QStringLiteral("Gamma notes"), Qt::EditRole));
    CHECK(app.controller.title() == QStringLiteral("Gamma notes"));
    app.controller.flushStorage();
    REQUIRE(wait_until([&] { return app.listTitles().contains(QStringLiteral("Gamma notes")); }, kWaitMs));

    // Ctrl+F focuses the search box; typing filters by message text (search_conversations).
    app.window.activateWindow();
    QTest::keyClick(&app.window, Qt::Key_F, Qt::ControlModifier);
    auto* search = app.child<QLineEdit>("searchBox");
    CHECK(wait_until([&] { return search->hasFocus(); }, 2000));
    search->setText(QStringLiteral("TENT"));
    REQUIRE(wait_until([&] { return app.listTitles() == QStringList({QStringLiteral("Alpha trip")}); }, kWaitMs));
    search->setText(QStringLiteral("bread"));
    REQUIRE(wait_until([&] { return app.listTitles() == QStringList({QStringLiteral("Beta recipes")}); }, kWaitMs));
    search->clear();
    REQUIRE(wait_until([&] { return app.listTitles().size() == 3; }, kWaitMs));

    // Delete the open conversation: hidden at once, another one opens, the undo bar shows.
    app.controller.openConversation(alpha);
    REQUIRE(wait_until([&] { return app.controller.model()->rowCount() == 2; }, kWaitMs));
    app.controller.deleteConversation(alpha);
    CHECK_FALSE(app.listTitles().contains(QStringLiteral("Alpha trip")));
    CHECK(app.controller.conversationId() != alpha);
    auto* undo_bar = app.child<QWidget>("undoBar");
    CHECK(undo_bar->isVisible());
    CHECK(app.child<QLabel>("undoLabel")->text().contains(QStringLiteral("Alpha trip")));
    QTest::mouseClick(app.child<QPushButton>("undoButton"), Qt::LeftButton);
    CHECK_FALSE(undo_bar->isVisible());
    CHECK(app.listTitles().contains(QStringLiteral("Alpha trip")));
    REQUIRE(wait_until([&] { return app.controller.model()->rowCount() == 2; }, kWaitMs));
    CHECK(app.controller.conversationId() == alpha);

    // Delete again and let the undo window close: now it is gone from the database.
    app.controller.deleteConversation(alpha);
    app.controller.commitPendingDelete();
    app.controller.flushStorage();
    ConversationStore check(db.toStdString());
    CHECK_FALSE(check.conversation(alpha).has_value());
    CHECK(check.conversation(beta).has_value());

    // A pending deletion still open when the app closes is carried out.
    app.controller.deleteConversation(beta);
    CHECK(app.controller.pendingDeleteId() == beta);
  }

  // Restart on the same file: the renamed conversation is there, the deleted ones are not.
  {
    App app(db);
    CHECK(app.listTitles() == QStringList({QStringLiteral("Gamma notes")}));
    CHECK(app.controller.conversationId() == fresh);
    CHECK(app.controller.title() == QStringLiteral("Gamma notes"));
  }
}

TEST_CASE("gui conversations: the system prompt goes first into the context and is saved", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  const QString prompt = QStringLiteral("You are a terse pirate.");
  {
    App app(db);
    std::optional<GenerateJob> job;
    QObject::connect(&app.controller, &ChatController::generateRequested,
                     [&job](const GenerateJob& j) { job = j; });
    auto* edit = app.child<QLineEdit>("systemPromptEdit");
    edit->setFocus();
    QTest::keyClicks(edit, prompt);
    QTest::keyClick(edit, Qt::Key_Return);  // editingFinished
    CHECK(app.controller.systemPrompt() == prompt);

    app.type_and_send(QStringLiteral("Where is the treasure?"));
    REQUIRE(job.has_value());
    REQUIRE(job->messages.size() == 2);
    CHECK(job->messages[0].role == "system");
    CHECK(job->messages[0].content == prompt.toStdString());
    CHECK(job->messages[1].role == "user");
    CHECK(job->messages[1].content == "Where is the treasure?");
    REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kWaitMs));
  }
  {
    App app(db);
    CHECK(app.controller.systemPrompt() == prompt);
    CHECK(app.child<QLineEdit>("systemPromptEdit")->text() == prompt);
  }
}

TEST_CASE("gui conversations: sending without a loadable model shows an inline error, history stays usable", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t older = 0;
  {
    ConversationStore store(db.toStdString());
    older = store.create_conversation("Older");
    store.add_message(msg(older, "user", "an old question"));
    store.create_conversation("Current");
  }
  App app(db);
  app.type_and_send(QStringLiteral("hello"));
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kWaitMs));
  ChatModel* model = app.controller.model();
  REQUIRE(model->rowCount() == 2);
  CHECK(model->item(1).role == QStringLiteral("error"));
  CHECK(model->item(1).text.contains(QStringLiteral("No model loaded")));
  CHECK(app.child<ChatView>("chatView")->toPlainText().contains(QStringLiteral("No model loaded")));
  CHECK(app.child<QLabel>("errorBanner")->isVisible());
  CHECK(app.child<QPushButton>("sendButton")->isEnabled());

  // The next send replaces the old error bubble instead of stacking them, and the error bubble
  // never goes into the context.
  std::optional<GenerateJob> job;
  QObject::connect(&app.controller, &ChatController::generateRequested, [&job](const GenerateJob& j) { job = j; });
  app.type_and_send(QStringLiteral("again"));
  REQUIRE(job.has_value());
  REQUIRE(job->messages.size() == 2);
  CHECK(job->messages[0].content == "hello");
  CHECK(job->messages[1].content == "again");
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kWaitMs));
  REQUIRE(model->rowCount() == 3);
  CHECK(model->item(2).role == QStringLiteral("error"));

  // History is still there to read.
  app.controller.openConversation(older);
  REQUIRE(wait_until([&] { return model->rowCount() == 1; }, kWaitMs));
  CHECK(model->item(0).text == QStringLiteral("an old question"));
}

TEST_CASE("gui conversations: export files contain the messages and JSON imports back identically", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t src = 0;
  {
    ConversationStore store(db.toStdString());
    src = store.create_conversation("Round trip", "Be brief.");
    store.add_message(msg(src, "user", "What is 2 + 2?"));
    const int64_t old_reply = store.add_message(msg(src, "assistant", "Five.", {11, 12}));
    store.add_message_replacing(old_reply, msg(src, "assistant", "Four <b>&</b>", {13, 14, 15}));
  }
  App app(db);
  REQUIRE(app.controller.conversationId() == src);
  QSignalSpy exported(&app.controller, &ChatController::exported);
  const QString md = dir.filePath(QStringLiteral("c.md"));
  const QString html = dir.filePath(QStringLiteral("c.html"));
  const QString json = dir.filePath(QStringLiteral("c.json"));
  app.controller.exportConversation(ExportFormat::markdown, md);
  app.controller.exportConversation(ExportFormat::html, html);
  app.controller.exportConversation(ExportFormat::json, json);
  REQUIRE(wait_until([&] { return exported.count() == 3; }, kWaitMs));
  INFO("status: " << app.controller.statusText().toStdString());
  const QString md_text = read_all(md);
  CHECK(md_text.contains(QStringLiteral("What is 2 + 2?")));
  CHECK(md_text.contains(QStringLiteral("Four")));
  CHECK(md_text.contains(QStringLiteral("Be brief.")));
  const QString html_text = read_all(html);
  CHECK(html_text.contains(QStringLiteral("What is 2 + 2?")));
  CHECK(html_text.contains(QStringLiteral("Four &lt;b&gt;&amp;&lt;/b&gt;")));  // escaped
  CHECK(read_all(json).contains(QStringLiteral("\"Five.\"")));  // inactive branch kept

  QSignalSpy imported(&app.controller, &ChatController::imported);
  app.controller.importJson(json);
  REQUIRE(wait_until([&] { return imported.count() == 1; }, kWaitMs));
  const qint64 copy = imported.front().front().toLongLong();
  CHECK(copy != src);
  REQUIRE(wait_until([&] { return app.controller.conversationId() == copy && app.controller.model()->rowCount() == 2; },
                     kWaitMs));
  // The copy is told apart from the original it was exported from (issue 12).
  CHECK(app.listTitles().count(QStringLiteral("Round trip")) == 1);
  CHECK(app.listTitles().count(QStringLiteral("Round trip (imported)")) == 1);
  CHECK(app.controller.systemPrompt() == QStringLiteral("Be brief."));

  app.controller.flushStorage();
  ConversationStore store(db.toStdString());
  const std::vector<Message> a = store.all_messages(src);
  const std::vector<Message> b = store.all_messages(copy);
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("message " << i);
    CHECK(b[i].role == a[i].role);
    CHECK(b[i].text == a[i].text);
    CHECK(b[i].token_ids == a[i].token_ids);
    CHECK(b[i].drafted == a[i].drafted);
    CHECK(b[i].tokenizer_hash == a[i].tokenizer_hash);
    CHECK(b[i].template_name == a[i].template_name);
    CHECK(b[i].active == a[i].active);
    CHECK(b[i].stats.n_tokens == a[i].stats.n_tokens);
  }

  // A file that is not an export is refused with a message; nothing is added.
  const QString junk = dir.filePath(QStringLiteral("junk.json"));
  {
    QFile f(junk);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("{\"format\": \"something else\"}");
  }
  app.controller.importJson(junk);
  REQUIRE(wait_until([&] { return app.controller.statusIsError(); }, kWaitMs));
  CHECK(app.controller.statusText().contains(QStringLiteral("Could not import")));
  app.controller.flushStorage();
  CHECK(store.list_conversations().size() == 2);
}

TEST_CASE("gui conversations: send streams, Esc stops, regenerate keeps the old reply", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  App app(db, /*load_bundled=*/true);
  ChatModel* model = app.controller.model();

  app.type_and_send(QStringLiteral("Name a color."));
  REQUIRE(model->rowCount() == 2);
  CHECK(model->item(1).streaming);
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kReplyTimeoutMs));
  INFO("status: " << app.controller.statusText().toStdString());
  REQUIRE_FALSE(app.controller.statusIsError());
  REQUIRE(model->rowCount() == 2);
  const QString first = model->item(1).text;
  REQUIRE(model->item(1).has_stats);
  CHECK(model->item(1).stats.n_tokens > 0);

  // Regenerate (greedy: the same text comes back); the old reply stays as an inactive branch.
  QTest::mouseClick(app.child<QPushButton>("regenerateButton"), Qt::LeftButton);
  CHECK(app.controller.isBusy());
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, kReplyTimeoutMs));
  REQUIRE(model->rowCount() == 2);
  CHECK(model->item(1).text == first);
  app.controller.flushStorage();
  REQUIRE(wait_until([&] { return model->item(1).id > 0; }, kWaitMs));
  {
    ConversationStore store(db.toStdString());
    const auto all = store.all_messages(app.controller.conversationId());
    REQUIRE(all.size() == 3);
    CHECK_FALSE(all[1].active);
    CHECK(all[2].active);
    CHECK(all[2].id == model->item(1).id);
    CHECK(store.messages(app.controller.conversationId()).size() == 2);
  }

  // Esc stops a long reply; what it produced is kept.
  GenerationSettings s;
  s.max_tokens = 100000;
  app.controller.setSettings(s);
  app.type_and_send(QStringLiteral("Tell me a long story."));
  REQUIRE(wait_until([&] { return !app.controller.isBusy() || model->item(3).n_tokens > 0; }, kReplyTimeoutMs));
  QTest::keyClick(&app.window, Qt::Key_Escape);
  REQUIRE(wait_until([&] { return !app.controller.isBusy(); }, 10000));
  REQUIRE(model->rowCount() == 4);
  CHECK_FALSE(model->item(3).streaming);
  const QString finish = model->item(3).finish;
  CHECK((finish == QLatin1String("cancelled") || finish == QLatin1String("eos")));

  // Leaving a conversation mid-reply (Ctrl+N) stops the reply and still saves it there.
  const qint64 first_conv = app.controller.conversationId();
  app.type_and_send(QStringLiteral("Tell me another long story."));
  REQUIRE(wait_until([&] { return !app.controller.isBusy() || model->item(5).n_tokens > 0; }, kReplyTimeoutMs));
  QTest::keyClick(&app.window, Qt::Key_N, Qt::ControlModifier);
  CHECK_FALSE(app.controller.isBusy());
  CHECK(model->rowCount() == 0);
  {
    ConversationStore store(db.toStdString());
    REQUIRE(wait_until([&] {
      app.controller.flushStorage();
      return store.messages(first_conv).size() == 6;
    }, kWaitMs));
    const Message last = store.messages(first_conv).back();
    CHECK(last.role == "assistant");
    CHECK_FALSE(last.token_ids.empty());
  }
  app.controller.openConversation(first_conv);
  REQUIRE(wait_until([&] { return model->rowCount() == 6; }, kWaitMs));

  // The export holds what was generated.
  QSignalSpy exported(&app.controller, &ChatController::exported);
  const QString md = dir.filePath(QStringLiteral("c.md"));
  app.controller.exportConversation(ExportFormat::markdown, md);
  REQUIRE(wait_until([&] { return exported.count() == 1; }, kWaitMs));
  const QString text = read_all(md);
  CHECK(text.contains(QStringLiteral("Name a color.")));
  CHECK(text.contains(first.trimmed().left(20)));
}

TEST_CASE("gui conversations: a corrupt database is moved aside, reported, and a fresh one works", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  {
    QFile f(db);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, 'x'));
  }
  App app(db);
  INFO("status: " << app.controller.statusText().toStdString());
  CHECK(app.controller.isPersistent());
  CHECK(app.controller.statusIsError());
  CHECK(app.controller.statusText().contains(QStringLiteral("moved to")));
  CHECK(app.child<QLabel>("errorBanner")->isVisible());
  CHECK(app.listTitles().size() == 1);
  app.controller.renameConversation(app.controller.conversationId(), QStringLiteral("Fresh start"));
  app.controller.flushStorage();
  ConversationStore store(db.toStdString());
  REQUIRE(store.list_conversations().size() == 1);
  CHECK(store.list_conversations().front().title == "Fresh start");
}
