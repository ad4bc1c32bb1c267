// Edit and resend (issue 12, feature 2): editing a user message starts a new branch; the old
// turn and what followed stay stored as inactive; the next context is exactly the active path
// with each reply's stored token ids; the branch is what opens after a restart. Deleting a
// message removes it from the view and the database.
#include <catch2/catch.hpp>

#include <QTemporaryDir>
#include <QTest>

#include "storage/conversation_store.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

using namespace specchat::ui;
using specchat::ConversationStore;
using specchat::Message;
using specchat::test::wait_until;

namespace {

constexpr int kWaitMs = 10000;

Message msg(int64_t conv, const char* role, const char* text, std::vector<int32_t> ids = {}) {
  Message m;
  m.conversation_id = conv;
  m.role = role;
  m.text = text;
  m.token_ids = std::move(ids);
  if (m.role == "assistant") {
    m.tokenizer_hash = 77;
    m.template_name = "chatml";
    m.stats.mode = "baseline";
  }
  return m;
}

}  // namespace

TEST_CASE("gui branches: edit makes a new branch, the context is the active path's stored ids, it survives a restart", "[gui][unit]") {
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t conv = 0;
  {
    ConversationStore s(db.toStdString());
    conv = s.create_conversation("branches");
    s.add_message(msg(conv, "user", "first question"));
    s.add_message(msg(conv, "assistant", "first answer", {11, 12, 13}));
    s.add_message(msg(conv, "user", "second question"));
    s.add_message(msg(conv, "assistant", "second answer", {21, 22}));
  }
  {
    EngineHost engine;
    engine.loadModels(QStringLiteral("/nonexistent/model.gguf"), QString());  // replies fail fast
    ChatController c(engine.worker(), db);
    REQUIRE(c.conversationId() == conv);
    REQUIRE(c.model()->rowCount() == 4);
    c.editMessage(1, QStringLiteral("not a user row"));  // a reply cannot be edited
    CHECK(c.model()->rowCount() == 4);

    c.editMessage(2, QStringLiteral("second question, rephrased"));
    REQUIRE(c.model()->rowCount() >= 3);
    CHECK(c.model()->item(2).text == QStringLiteral("second question, rephrased"));
    REQUIRE(wait_until([&] { return !c.isBusy(); }, kWaitMs));  // no model: the reply fails
    // The context a resend would use: the active path with the reply's stored ids.
    const std::vector<specchat::ContextMessage> ctx = c.contextMessages();
    REQUIRE(ctx.size() == 3);
    CHECK(ctx[0].message.content == "first question");
    CHECK(ctx[1].ids == std::vector<int32_t>{11, 12, 13});
    CHECK(ctx[1].tokenizer_hash == 77);
    CHECK(ctx[2].message.content == "second question, rephrased");
    c.flushStorage();
    ConversationStore s(db.toStdString());
    const auto all = s.all_messages(conv);
    REQUIRE(all.size() == 5);
    CHECK_FALSE(all[2].active);  // the old question: an alternative, with its answer below it
    CHECK(all[3].parent_id == all[2].id);
    CHECK(all[4].text == "second question, rephrased");
    CHECK(all[4].parent_id == all[2].parent_id);
    const auto path = s.messages(conv);
    REQUIRE(path.size() == 3);
    CHECK(path[1].token_ids == std::vector<int32_t>{11, 12, 13});
  }
  // After a restart the new branch is what opens.
  EngineHost engine;
  engine.loadModels(QStringLiteral("/nonexistent/model.gguf"), QString());
  ChatController again(engine.worker(), db);
  REQUIRE(again.model()->rowCount() == 3);
  CHECK(again.model()->item(2).text == QStringLiteral("second question, rephrased"));

  // Delete a message: gone from the view and, after a restart, from the path; the turns after
  // it stay.
  again.deleteMessage(1);
  CHECK(again.model()->rowCount() == 2);
  REQUIRE(wait_until([&] { return again.model()->rowCount() == 2 && again.model()->item(1).text ==
                                                                          QStringLiteral("second question, rephrased"); },
                     kWaitMs));
  again.flushStorage();
  ConversationStore s(db.toStdString());
  CHECK(s.messages(conv).size() == 2);
}

TEST_CASE("gui branches: regenerated replies are browsable as ‹ i/n ›, the choice is the active path after a restart", "[gui][unit]") {
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t conv = 0, first = 0, second = 0, third = 0;
  {
    ConversationStore s(db.toStdString());
    conv = s.create_conversation("alternatives");
    s.add_message(msg(conv, "user", "tell me a story"));
    first = s.add_message(msg(conv, "assistant", "story one", {1, 2}));
    second = s.add_message_replacing(first, msg(conv, "assistant", "story two", {3, 4}));  // Regenerate
    third = s.add_message_replacing(second, msg(conv, "assistant", "story three", {5, 6}));
    REQUIRE(s.alternatives(third).size() == 3);
  }
  {
    EngineHost engine;
    ChatController c(engine.worker(), db);
    ChatModel* m = c.model();
    REQUIRE(m->rowCount() == 2);
    REQUIRE(wait_until([&] { return m->item(1).alt_count == 3; }, kWaitMs));
    CHECK(m->item(1).alt_index == 2);
    CHECK(m->item(1).text == QStringLiteral("story three"));
    c.showAlternative(1, +1);  // already the last: nothing
    c.showAlternative(0, -1);  // the question has no other version: nothing
    c.showAlternative(1, -1);
    REQUIRE(wait_until([&] { return m->rowCount() == 2 && m->item(1).text == QStringLiteral("story two"); }, kWaitMs));
    REQUIRE(wait_until([&] { return m->item(1).alt_count == 3 && m->item(1).alt_index == 1; }, kWaitMs));
    // The context is the active path's stored ids.
    const std::vector<specchat::ContextMessage> ctx = c.contextMessages();
    REQUIRE(ctx.size() == 2);
    CHECK(ctx[1].ids == std::vector<int32_t>{3, 4});
    c.flushStorage();
  }
  // After a restart the chosen reply is still the active one.
  EngineHost engine;
  ChatController again(engine.worker(), db);
  REQUIRE(again.model()->rowCount() == 2);
  CHECK(again.model()->item(1).text == QStringLiteral("story two"));
  REQUIRE(wait_until([&] { return again.model()->item(1).alt_count == 3; }, kWaitMs));
  CHECK(again.model()->item(1).alt_index == 1);
  ConversationStore s(db.toStdString());
  const auto path = s.messages(conv);
  REQUIRE(path.size() == 2);
  CHECK(path[1].id == second);
  (void)first;
  (void)third;
}

TEST_CASE("gui branches: an earlier reply or an edited earlier message switches with the turns that followed it", "[gui][unit]") {
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t conv = 0;
  {
    ConversationStore s(db.toStdString());
    conv = s.create_conversation("earlier branches");
    s.add_message(msg(conv, "user", "q1"));
    const int64_t a1 = s.add_message(msg(conv, "assistant", "a1", {1}));
    s.add_message(msg(conv, "user", "q2"));
    s.add_message(msg(conv, "assistant", "a2", {2}));
    s.add_message_replacing(a1, msg(conv, "assistant", "b1", {3}));  // another reply to q1...
    s.add_message(msg(conv, "user", "q3"));                          // ...and a talk that went on from it
    s.add_message(msg(conv, "assistant", "b3", {4}));
  }
  auto texts = [](const ChatModel* m) {
    QStringList out;
    for (int r = 0; r < m->rowCount(); ++r) out << m->item(r).text;
    return out;
  };
  {
    EngineHost engine;
    engine.loadModels(QStringLiteral("/nonexistent/model.gguf"), QString());  // replies fail fast
    ChatController c(engine.worker(), db);
    ChatModel* m = c.model();
    REQUIRE(texts(m) == QStringList({"q1", "b1", "q3", "b3"}));
    REQUIRE(wait_until([&] { return m->item(1).alt_count == 2; }, kWaitMs));
    CHECK(m->item(1).alt_index == 1);
    CHECK(m->item(0).alt_count == 0);  // no other version of the first question
    CHECK(m->item(3).alt_count == 0);

    c.showAlternative(1, -1);  // the first reply, with the turns that followed it
    REQUIRE(wait_until([&] { return texts(m) == QStringList({"q1", "a1", "q2", "a2"}); }, kWaitMs));
    REQUIRE(wait_until([&] { return m->item(1).alt_count == 2 && m->item(1).alt_index == 0; }, kWaitMs));
    std::vector<specchat::ContextMessage> ctx = c.contextMessages();
    REQUIRE(ctx.size() == 4);
    CHECK(ctx[1].ids == std::vector<int32_t>{1});
    CHECK(ctx[3].ids == std::vector<int32_t>{2});

    // Edit the first question: a version beside it, browsable on the question itself.
    c.editMessage(0, QStringLiteral("q1, rephrased"));
    REQUIRE(wait_until([&] { return !c.isBusy(); }, kWaitMs));  // no model: the reply fails
    REQUIRE(wait_until([&] { return m->item(0).alt_count == 2 && m->item(0).alt_index == 1; }, kWaitMs));
    c.showAlternative(0, -1);
    REQUIRE(wait_until([&] { return texts(m) == QStringList({"q1", "a1", "q2", "a2"}); }, kWaitMs));
    REQUIRE(wait_until([&] { return m->item(0).alt_count == 2 && m->item(0).alt_index == 0; }, kWaitMs));
    c.flushStorage();
  }
  // After a restart the chosen branch is what opens, and the next context is its stored ids.
  EngineHost engine;
  ChatController again(engine.worker(), db);
  REQUIRE(texts(again.model()) == QStringList({"q1", "a1", "q2", "a2"}));
  const std::vector<specchat::ContextMessage> ctx = again.contextMessages();
  REQUIRE(ctx.size() == 4);
  CHECK(ctx[3].ids == std::vector<int32_t>{2});
  // Deleting the shown reply: the turns after it take its place, and its alternative stays
  // reachable beside them (never stranded).
  REQUIRE(wait_until([&] { return again.model()->item(1).alt_count == 2; }, kWaitMs));
  again.deleteMessage(1);
  REQUIRE(wait_until([&] { return texts(again.model()) == QStringList({"q1", "q2", "a2"}); }, kWaitMs));
  REQUIRE(wait_until([&] { return again.model()->item(1).alt_count == 2; }, kWaitMs));
  again.showAlternative(1, +1);
  REQUIRE(wait_until([&] { return texts(again.model()) == QStringList({"q1", "b1", "q3", "b3"}); }, kWaitMs));
  again.flushStorage();
  ConversationStore s(db.toStdString());
  CHECK(s.all_messages(conv).size() == 7);  // only the deleted reply is gone
}
