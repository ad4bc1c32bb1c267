// Continue a reply that stopped short (issue 12, feature 2): the last reply, cut by max tokens,
// gets a "Continue" link; continuing streams onto it from its stored ids, the whole reply is
// stored as the active alternative with the cut one kept, and — greedy — the joined ids are
// exactly what one uninterrupted reply gives. Runs on the bundled models.
#include <catch2/catch.hpp>

#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include "storage/conversation_store.h"
#include "test_paths.h"
#include "tests/ui/gui_model_app.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"

using namespace specchat::ui;
using specchat::ConversationStore;
using specchat::test::wait_until;

using App = specchat::test::ModelApp;

TEST_CASE("gui continue: a cut reply continues from its ids, stored whole beside the cut one", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  GenerationSettings s;
  s.max_tokens = 10;
  s.sampling.temperature = 0;
  App app(db, s);
  ChatController& c = app.controller;
  auto* view = app.window.findChild<ChatView*>();
  REQUIRE(view);

  CHECK_FALSE(c.canContinue());
  c.continueReply();  // nothing to continue: ignored
  CHECK_FALSE(c.isBusy());
  c.send(QStringLiteral("Tell me a story about a little fox."));
  REQUIRE(app.waitIdle());
  REQUIRE(c.model()->rowCount() == 2);
  const ChatItem cut = c.model()->item(1);
  REQUIRE(cut.finish == QStringLiteral("length"));
  REQUIRE(cut.token_ids.size() == 10);
  CHECK(c.canContinue());
  CHECK(view->continueRow() == 1);  // the link is shown under the cut reply

  c.continueReply();
  REQUIRE(app.waitIdle());
  REQUIRE(c.model()->rowCount() == 2);
  const ChatItem whole = c.model()->item(1);
  CHECK(whole.text.startsWith(cut.text));
  CHECK(whole.text.size() > cut.text.size());
  REQUIRE(whole.token_ids.size() == 20);
  CHECK(std::equal(cut.token_ids.begin(), cut.token_ids.end(), whole.token_ids.begin()));
  c.flushStorage();
  qint64 conv = c.conversationId();
  {
    ConversationStore store(db.toStdString());
    const auto path = store.messages(conv);
    REQUIRE(path.size() == 2);
    CHECK(path[1].token_ids == whole.token_ids);
    CHECK(path[1].text == whole.text.toStdString());
    const auto alts = store.alternatives(path[1].id);
    REQUIRE(alts.size() == 2);  // the cut reply is kept as an inactive alternative
    CHECK(alts[0].token_ids == cut.token_ids);
  }

  // Greedy: 10 + 10 continued tokens are what 20 in one go give.
  GenerationSettings s20 = s;
  s20.max_tokens = 20;
  c.setSettings(s20);
  c.regenerate();
  REQUIRE(app.waitIdle());
  CHECK(c.model()->item(1).token_ids == whole.token_ids);
  CHECK(c.model()->item(1).text == whole.text);

  // A new turn: the old reply's link goes away (only the last reply can be continued).
  c.setSettings(s);
  c.send(QStringLiteral("And then?"));
  REQUIRE(app.waitIdle());
  REQUIRE(c.model()->rowCount() == 4);
  CHECK(view->continueRow() == (c.model()->item(3).finish == QStringLiteral("length") ? 3 : -1));
}
