// GUI tests that need no model files: the chat model, the view, the input box, and the
// error paths (missing or broken model file, unusable database) that must leave the app
// running with the reason on the status line.
#include <catch2/catch.hpp>

#include <QFile>
#include <QLabel>
#include <QPointer>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QScrollBar>
#include <QTextCursor>
#include <QTest>

#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/chat_model.h"
#include "ui/chat_view.h"
#include "ui/engine_types.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/prompt_edit.h"

using namespace specchat::ui;
using specchat::test::wait_until;

TEST_CASE("gui: stats line format", "[gui][unit]") {
  specchat::MessageStats s;
  s.mode = "speculative";
  s.tokens_per_s = 12.34;
  s.acceptance_rate = 0.4149;
  s.mean_accepted_length = 2.1;
  s.n_tokens = 64;
  CHECK(format_stats(s) == QStringLiteral("12.3 tok/s \u00b7 \u03b1 0.41 \u00b7 \u03c4 2.10 \u00b7 64 tokens"));
  s.mode = "baseline";
  CHECK(format_stats(s) == QStringLiteral("12.3 tok/s \u00b7 baseline \u00b7 64 tokens"));
}

TEST_CASE("gui: chat model streams into the last reply", "[gui][unit]") {
  ChatModel m;
  QSignalSpy changed(&m, &QAbstractItemModel::dataChanged);
  ChatItem user;
  user.role = QStringLiteral("user");
  user.text = QStringLiteral("hi");
  m.append(user);
  ChatItem reply;
  reply.role = QStringLiteral("assistant");
  reply.streaming = true;
  const int row = m.append(reply);
  REQUIRE(m.rowCount() == 2);
  m.appendToken(row, QStringLiteral("Hel"), true, 0);
  m.appendToken(row, QString(), false, 0);  // a token that completes no UTF-8 yet
  m.appendToken(row, QStringLiteral("lo"), false, 1);
  CHECK(changed.count() == 3);
  // Each token keeps its provenance and step for the draft visualization.
  REQUIRE(m.item(row).pieces.size() == 3);
  CHECK(m.item(row).pieces[0].text == QStringLiteral("Hel"));
  CHECK(m.item(row).pieces[0].drafted);
  CHECK_FALSE(m.item(row).pieces[1].drafted);
  CHECK(m.item(row).pieces[2].step == 1);
  const QModelIndex i = m.index(row);
  CHECK(m.data(i, ChatModel::TextRole).toString() == QStringLiteral("Hello"));
  CHECK(m.data(i, Qt::DisplayRole).toString() == QStringLiteral("Hello"));
  CHECK(m.data(i, ChatModel::TokenCountRole).toInt() == 3);
  CHECK(m.data(i, ChatModel::DraftedCountRole).toInt() == 1);
  CHECK(m.data(i, ChatModel::StreamingRole).toBool());
  CHECK_FALSE(m.data(i, ChatModel::StatsRole).isValid());
  CHECK(m.roleNames().value(ChatModel::RoleRole) == QByteArray("role"));
  // A streaming reply is not part of the next prompt.
  REQUIRE(m.chatMessages().size() == 1);

  specchat::MessageStats st;
  st.mode = "speculative";
  st.n_tokens = 3;
  st.n_accepted = 1;
  m.finishReply(row, QStringLiteral("Hello!"), st, QStringLiteral("eos"));
  CHECK_FALSE(m.data(i, ChatModel::StreamingRole).toBool());
  CHECK(m.data(i, ChatModel::StatsRole).value<specchat::MessageStats>().n_tokens == 3);
  CHECK(m.data(i, ChatModel::StatsTextRole).toString().endsWith(QStringLiteral("3 tokens")));
  CHECK(m.data(i, ChatModel::FinishRole).toString() == QStringLiteral("eos"));
  const auto msgs = m.chatMessages();
  REQUIRE(msgs.size() == 2);
  CHECK(msgs[1].role == "assistant");
  CHECK(msgs[1].content == "Hello!");
}

TEST_CASE("gui: chat view follows the model", "[gui][unit]") {
  ChatModel m;
  ChatView v;
  v.setModel(&m);
  ChatItem user;
  user.role = QStringLiteral("user");
  user.text = QStringLiteral("line one\nline two");
  m.append(user);
  ChatItem reply;
  reply.role = QStringLiteral("assistant");
  reply.streaming = true;
  const int row = m.append(reply);
  m.appendToken(row, QStringLiteral("Once"), false, 0);
  m.appendToken(row, QStringLiteral(" upon"), true, 1);
  CHECK(v.toPlainText() == QStringLiteral("You\nline one\nline two\nAssistant\nOnce upon"));
  specchat::MessageStats st;
  st.mode = "baseline";
  st.n_tokens = 2;
  m.finishReply(row, QStringLiteral("Once upon a"), st, QStringLiteral("length"));
  // A reply cut by max tokens says so after its stats (issue 12: finish reasons were invisible),
  // and, being the last reply, offers to continue.
  CHECK(v.toPlainText() == QStringLiteral("You\nline one\nline two\nAssistant\nOnce upon a\n") + format_stats(st) +
                               QStringLiteral(" \u00b7 ") + finish_reason_text(QStringLiteral("length")) +
                               QStringLiteral(" \u00b7 Continue"));
  CHECK(v.continueRow() == row);
  // Copy "this message": a position in a row's header or text maps to that row.
  const QString plain = v.toPlainText();
  CHECK(v.rowAtPosition(static_cast<int>(plain.indexOf(QStringLiteral("You")))) == 0);
  CHECK(v.rowAtPosition(static_cast<int>(plain.indexOf(QStringLiteral("line two"))) + 2) == 0);
  CHECK(v.rowAtPosition(static_cast<int>(plain.indexOf(QStringLiteral("Assistant"))) + 1) == 1);
  CHECK(v.rowAtPosition(static_cast<int>(plain.indexOf(QStringLiteral("upon")))) == 1);
  CHECK(v.rowAtPosition(-1) == -1);
  // A theme change (new palette) re-renders the text in the new colours (a dark theme would
  // otherwise leave the open conversation black on dark grey).
  QPalette dark = v.palette();
  dark.setColor(QPalette::Text, QColor(230, 230, 230));
  v.setPalette(dark);
  QTextCursor at_body(v.document());
  at_body.setPosition(static_cast<int>(plain.indexOf(QStringLiteral("line one"))) + 1);
  CHECK(at_body.charFormat().foreground().color() == QColor(230, 230, 230));
  CHECK(v.toPlainText() == plain);
  // Only the last reply offers Continue: a following message takes the link away.
  ChatItem next;
  next.role = QStringLiteral("user");
  next.text = QStringLiteral("more");
  m.append(next);
  CHECK_FALSE(v.toPlainText().contains(QStringLiteral("Continue")));
  CHECK(v.continueRow() == -1);
  m.removeAt(row + 1);
  CHECK(v.toPlainText() == plain);
  m.removeAt(row);
  CHECK(v.toPlainText() == QStringLiteral("You\nline one\nline two"));
  m.clear();
  CHECK(v.toPlainText().isEmpty());
}

TEST_CASE("gui: Enter submits, Shift+Enter adds a line", "[gui][unit]") {
  PromptEdit e;
  e.show();
  QSignalSpy submitted(&e, &PromptEdit::submitted);
  QTest::keyClicks(&e, QStringLiteral("ab"));
  QTest::keyClick(&e, Qt::Key_Return, Qt::ShiftModifier);
  QTest::keyClicks(&e, QStringLiteral("c"));
  CHECK(submitted.count() == 0);
  CHECK(e.toPlainText() == QStringLiteral("ab\nc"));
  QTest::keyClick(&e, Qt::Key_Return);
  QTest::keyClick(&e, Qt::Key_Enter);
  CHECK(submitted.count() == 2);
  CHECK(e.toPlainText() == QStringLiteral("ab\nc"));
}

TEST_CASE("gui: a bad model file is reported and the app keeps running", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString bad = dir.filePath(QStringLiteral("broken.gguf"));
  {
    QFile f(bad);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("this is not a GGUF file at all");
  }
  const QString missing = dir.filePath(QStringLiteral("missing-target.gguf"));
  const QString target = GENERATE_COPY(bad, missing);

  EngineHost engine;
  ChatController controller(engine.worker(), dir.filePath(QStringLiteral("chat.sqlite")));
  MainWindow window(&controller);
  window.show();
  auto* status = window.findChild<QLabel*>(QStringLiteral("statusLabel"));
  REQUIRE(status != nullptr);
  engine.loadModels(target, QString());
  REQUIRE(wait_until([&] { return controller.statusIsError(); }, 10000));
  INFO("status: " << status->text().toStdString());
  CHECK_FALSE(status->text().isEmpty());
  CHECK(status->text() == controller.statusText());
  CHECK_FALSE(engine.worker()->hasModels());

  // Sending still works: the user message stays, the failed reply is dropped, no crash.
  auto* input = window.findChild<PromptEdit*>(QStringLiteral("promptInput"));
  REQUIRE(input != nullptr);
  QTest::keyClicks(input, QStringLiteral("hello"));
  QTest::keyClick(input, Qt::Key_Return);
  REQUIRE(wait_until([&] { return !controller.isBusy(); }, 10000));
  CHECK(controller.statusIsError());
  CHECK(status->text().startsWith(QStringLiteral("No model loaded")));
  // The user message stays; the failure shows inline as an error bubble (not part of the context).
  REQUIRE(controller.model()->rowCount() == 2);
  CHECK(controller.model()->item(0).text == QStringLiteral("hello"));
  CHECK(controller.model()->item(1).role == QStringLiteral("error"));
  CHECK(controller.model()->item(1).text.contains(QStringLiteral("No model loaded")));
  CHECK(window.findChild<QLabel*>(QStringLiteral("errorBanner"))->isVisible());
  controller.flushStorage();
  REQUIRE(wait_until([&] { return controller.model()->item(0).id > 0; }, 5000));  // saved
  CHECK(window.findChild<QPushButton*>(QStringLiteral("sendButton"))->isEnabled());
}

TEST_CASE("gui: an unusable database is reported and chat works unsaved", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  // A regular file where the database's directory should be.
  const QString blocker = dir.filePath(QStringLiteral("not-a-dir"));
  {
    QFile f(blocker);
    REQUIRE(f.open(QIODevice::WriteOnly));
  }
  EngineHost engine;
  engine.loadModels(dir.filePath(QStringLiteral("no-such-model.gguf")), QString());
  ChatController controller(engine.worker(), blocker + QStringLiteral("/chat.sqlite"));
  CHECK_FALSE(controller.isPersistent());
  CHECK(controller.statusIsError());
  INFO("status: " << controller.statusText().toStdString());
  CHECK(controller.statusText().startsWith(QStringLiteral("Conversations are not saved")));
  MainWindow window(&controller);
  window.show();
  controller.send(QStringLiteral("hi"));  // no models here: the reply fails, the message stays
  REQUIRE(wait_until([&] { return !controller.isBusy(); }, 10000));
  REQUIRE(controller.model()->rowCount() == 2);  // the message and the inline error
  CHECK(controller.model()->item(0).id == 0);
  CHECK(controller.model()->item(1).role == QStringLiteral("error"));
}

TEST_CASE("gui: the engine host runs the worker on its own thread and deletes it", "[gui][unit]") {
  QPointer<EngineWorker> worker;
  {
    EngineHost engine;
    worker = engine.worker();
    CHECK(worker->thread() != qApp->thread());
    CHECK(worker->thread()->isRunning());
  }
  CHECK(worker.isNull());
}

TEST_CASE("gui: the CUDA backend without a usable GPU is an error in the window, not a crash", "[gui][model]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  EngineHost engine;
  ChatController controller(engine.worker(), dir.filePath(QStringLiteral("chat.sqlite")));
  MainWindow window(&controller);
  window.show();
  engine.worker()->setBackends(specchat::BackendKind::cuda, specchat::BackendKind::cpu);
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(wait_until([&] { return controller.statusIsError() || engine.worker()->hasModels(); }, 60000));
  if (engine.worker()->hasModels()) {
    SUCCEED("a CUDA device is present: the target loaded on it");
    return;
  }
  INFO("status: " << controller.statusText().toStdString());
  CHECK(controller.statusText().contains(QStringLiteral("CUDA")));
  // Back on the CPU, the same window loads and works.
  engine.worker()->setBackends(specchat::BackendKind::cpu, specchat::BackendKind::cpu);
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(wait_until([&] { return engine.worker()->hasModels(); }, 60000));
  // hasModels() turns true on the engine thread just before modelsLoaded is queued to the
  // controller: wait for the controller to have handled it.
  wait_until([&] { return !controller.statusIsError(); }, 10000);
  CHECK_FALSE(controller.statusIsError());
}

TEST_CASE("gui: a database problem stays on the status line after the models load", "[gui][model]") {
  // The case index is generated first: GENERATE keeps its first values, and paths in a
  // temporary directory must come from this run's directory.
  const int which = GENERATE(0, 1);
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString blocker = dir.filePath(QStringLiteral("not-a-dir"));  // a file, not a directory
  {
    QFile f(blocker);
    REQUIRE(f.open(QIODevice::WriteOnly));
  }
  const QString corrupt = dir.filePath(QStringLiteral("corrupt.sqlite"));
  {
    QFile f(corrupt);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, '\x5a'));
  }
  struct Case {
    QString db;
    bool error;
    QString says;
  };
  const Case c = which == 0 ? Case{blocker + QStringLiteral("/chat.sqlite"), true, QStringLiteral("not saved")}
                            : Case{corrupt, true, QStringLiteral(".corrupt-")};
  EngineHost engine;
  ChatController controller(engine.worker(), c.db);
  MainWindow window(&controller);
  window.show();
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(wait_until([&] { return controller.statusText().startsWith(QStringLiteral("Ready")); }, 60000));
  INFO("status: " << controller.statusText().toStdString());
  CHECK(controller.statusText().contains(c.says));
  CHECK(controller.statusIsError() == c.error);
}

TEST_CASE("gui: a conversation opens scrolled to its last message", "[gui][unit]") {
  ChatModel m;
  QList<ChatItem> items;
  for (int i = 0; i < 40; ++i) {
    ChatItem it;
    it.role = i % 2 ? QStringLiteral("assistant") : QStringLiteral("user");
    it.text = QStringLiteral("message %1 with some text to fill the line").arg(i);
    items.append(it);
  }
  m.setItems(items);  // as a conversation loaded from the database: before the view is shown
  ChatView v;
  v.resize(400, 200);
  v.setModel(&m);
  v.show();
  QScrollBar* bar = v.verticalScrollBar();
  REQUIRE(specchat::test::wait_until([&] { return bar->maximum() > 0 && bar->value() == bar->maximum(); }, 2000));
  // Switching to another long conversation also shows its end.
  bar->setValue(0);
  m.setItems(items);
  CHECK(specchat::test::wait_until([&] { return bar->value() == bar->maximum(); }, 2000));
}
