// Issue 12 on the bundled models: a fresh seed per reply at T > 0 unless pinned, stored with the
// reply (bug 2); the status bar while generating and the α/τ terms (bug 5); finish reasons
// stored and shown, also after a restart (bug 6). The request_settings unit test needs no model.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <QFileInfo>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include <set>

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

namespace {

constexpr int kReplyTimeoutMs = 60000;
constexpr int kWaitMs = 10000;

using App = specchat::test::ModelApp;

// The "seed" of each stored reply's generation record, in message order.
std::vector<uint64_t> stored_seeds(const QString& db, qint64 conversation) {
  ConversationStore store(db.toStdString());
  std::vector<uint64_t> out;
  for (const specchat::Message& m : store.all_messages(conversation)) {
    if (m.role != "assistant") continue;
    for (const specchat::GenerationRecord& g : store.generations(m.id))
      out.push_back(nlohmann::json::parse(g.params_json).at("seed").get<uint64_t>());
  }
  return out;
}

}  // namespace

TEST_CASE("gui generation: request settings draw a fresh seed at T > 0 unless pinned", "[gui][unit]") {
  GenerationSettings g;
  g.sampling.seed = 42;
  g.sampling.temperature = 0.8f;
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i) seeds.insert(request_settings(g).sampling.seed);
  CHECK(seeds.size() == 8);
  g.pin_seed = true;
  CHECK(request_settings(g).sampling.seed == 42);
  g.pin_seed = false;
  g.sampling.temperature = 0;  // greedy: the seed plays no part, it is left alone
  CHECK(request_settings(g).sampling.seed == 42);
}

TEST_CASE("gui generation: regenerate at T > 0 uses a new seed, stored with each reply, a pinned seed repeats", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  GenerationSettings s;
  s.max_tokens = 12;
  s.sampling.temperature = 1.0f;
  App app(db, s);
  app.controller.send(QStringLiteral("Name an animal."));
  REQUIRE(app.waitIdle());
  app.controller.regenerate();
  REQUIRE(app.waitIdle());
  app.controller.flushStorage();
  REQUIRE(wait_until([&] { return stored_seeds(db, app.controller.conversationId()).size() == 2; }, kWaitMs));
  std::vector<uint64_t> seeds = stored_seeds(db, app.controller.conversationId());
  CHECK(seeds[0] != seeds[1]);

  // Pinned: the stored seed is the pinned one, and the same seed gives the same reply.
  s.pin_seed = true;
  s.sampling.seed = seeds[0];
  app.controller.setSettings(s);
  const QString before = app.controller.model()->item(1).text;
  app.controller.regenerate();
  REQUIRE(app.waitIdle());
  const QString pinned_once = app.controller.model()->item(1).text;
  app.controller.regenerate();
  REQUIRE(app.waitIdle());
  CHECK(app.controller.model()->item(1).text == pinned_once);
  app.controller.flushStorage();
  REQUIRE(wait_until([&] { return stored_seeds(db, app.controller.conversationId()).size() == 4; }, kWaitMs));
  seeds = stored_seeds(db, app.controller.conversationId());
  CHECK(seeds[2] == s.sampling.seed);
  CHECK(seeds[3] == s.sampling.seed);
  (void)before;
}

TEST_CASE("gui generation: the status bar says a reply is being generated, in α/τ terms, finish reasons persist", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  GenerationSettings s;
  s.max_tokens = 3;  // cut by max tokens
  qint64 conv = 0;
  {
    App app(db, s);
    REQUIRE(wait_until([&] { return app.controller.modelsLoaded(); }, kReplyTimeoutMs));
    CHECK(app.controller.statusText().startsWith(QStringLiteral("Ready")));
    bool saw_generating = false, saw_ready_while_busy = false, saw_drafted_word = false;
    auto* stats = app.window.findChild<QLabel*>(QStringLiteral("statsLabel"));
    QObject::connect(&app.controller, &ChatController::statsChanged, [&](const QString& t) {
      if (t.contains(QStringLiteral(" drafted"))) saw_drafted_word = true;
    });
    app.controller.send(QStringLiteral("Count to one hundred."));
    while (app.controller.isBusy()) {
      const QString st = app.controller.statusText();
      if (st.startsWith(QStringLiteral("Ready"))) saw_ready_while_busy = true;
      if (st.contains(QStringLiteral("Generating"))) saw_generating = true;
      QTest::qWait(2);
    }
    CHECK(saw_generating);
    CHECK_FALSE(saw_ready_while_busy);
    CHECK_FALSE(saw_drafted_word);  // "drafted" is the live panel's proposed count, not accepted tokens
    CHECK(app.controller.statusText().startsWith(QStringLiteral("Ready")));  // back after the reply
    (void)stats;
    ChatModel* model = app.controller.model();
    REQUIRE(model->rowCount() == 2);
    CHECK(model->item(1).finish == QStringLiteral("length"));
    auto* view = app.window.findChild<ChatView*>(QStringLiteral("chatView"));
    CHECK(view->toPlainText().contains(finish_reason_text(QStringLiteral("length"))));
    conv = app.controller.conversationId();
    app.controller.flushStorage();
  }
  {
    ConversationStore store(db.toStdString());
    REQUIRE(store.messages(conv).size() == 2);
    CHECK(store.messages(conv)[1].finish == "length");
  }
  // After a restart the reason is still shown.
  App again(db, s);
  REQUIRE(wait_until([&] { return again.controller.model()->rowCount() == 2; }, kWaitMs));
  CHECK(again.controller.model()->item(1).finish == QStringLiteral("length"));
  CHECK(again.window.findChild<ChatView*>(QStringLiteral("chatView"))->toPlainText().contains(
      finish_reason_text(QStringLiteral("length"))));
}
