// The context meter (issue 12, feature 4): its counts are the target tokenizer's for the prompt
// the next Send would build, it follows the typed text, and the oldest messages that will not
// fit are marked in the chat view.
#include <catch2/catch.hpp>

#include <QFileInfo>
#include <QLabel>
#include <QTemporaryDir>
#include <QTest>

#include "engine/chat_context.h"
#include "engine/model_pair.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/analysis_tools.h"
#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/context_meter.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/prompt_edit.h"

using namespace specchat::ui;
using specchat::ChatMessage;
using specchat::ContextMessage;
using specchat::test::wait_until;

namespace {

constexpr int kWaitMs = 60000;

void add(specchat::ConversationStore& s, int64_t c, const char* role, const std::string& text) {
  specchat::Message m;
  m.conversation_id = c;
  m.role = role;
  m.text = text;
  s.add_message(m);
}

struct App {
  explicit App(const QString& db) : controller(engine.worker(), db), window(&controller) {
    tools = install_analysis_tools(window, engine.worker(), &controller);
    window.show();
    engine.loadModels(QString::fromStdString(specchat::test::target_model()),
                      QString::fromStdString(specchat::test::draft_model()));
  }
  // Waits for the meter's answer to the input as it is now.
  bool settle() {
    return wait_until([&] { return controller.modelsLoaded(); }, kWaitMs) &&
           (tools.context_meter->refresh(), true) &&
           wait_until([&] { return tools.context_meter->usage().ok && tools.context_meter->usage().id != seen_id; }, kWaitMs) &&
           (seen_id = tools.context_meter->usage().id, true);
  }
  EngineHost engine;
  ChatController controller;
  MainWindow window;
  AnalysisTools tools;
  quint64 seen_id = 0;
};

ContextMessage turn(const char* role, const std::string& text) { return ContextMessage{ChatMessage{role, text}, {}, 0, {}}; }

}  // namespace

TEST_CASE("gui context meter: the counts are the target tokenizer's and follow the typed text", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  {
    specchat::ConversationStore s(db.toStdString());
    const int64_t c = s.create_conversation("counted", "Be brief.");
    add(s, c, "user", "Hello there, how are you?");
    add(s, c, "assistant", "Very well, thank you.");
  }
  App app(db);
  const std::string typed = "How many tokens does this message take?";
  app.window.findChild<PromptEdit*>(QStringLiteral("promptInput"))->setPlainText(QString::fromStdString(typed));
  REQUIRE(app.settle());
  const ContextUsage u = app.tools.context_meter->usage();

  specchat::PairOptions o;
  o.target_path = specchat::test::target_model();
  const specchat::ModelPair pair = specchat::ModelPair::load(o);
  std::vector<ContextMessage> all = {turn("system", "Be brief."), turn("user", "Hello there, how are you?"),
                                     turn("assistant", "Very well, thank you."), turn("user", typed)};
  const int total = static_cast<int>(specchat::build_chat_context(pair, all).prompt.size());
  all.back() = turn("user", "");
  const int without = static_cast<int>(specchat::build_chat_context(pair, all).prompt.size());
  const int system = static_cast<int>(
      specchat::build_chat_context(pair, {turn("system", "Be brief."), turn("user", "")}).prompt.size());
  CHECK(u.prompt_tokens() == total);
  CHECK(u.message_tokens == total - without);
  CHECK(u.system_tokens == system);
  CHECK(u.history_tokens == without - system);
  CHECK(u.n_ctx == pair.target->n_ctx());
  CHECK(u.n_dropped == 0);
  const QString label = app.window.findChild<QLabel*>(QStringLiteral("contextMeterLabel"))->text();
  CHECK(label.contains(QString::number(u.message_tokens)));

  // Longer text, more tokens.
  app.window.findChild<PromptEdit*>(QStringLiteral("promptInput"))
      ->setPlainText(QString::fromStdString(typed + " And a few more words to count, please."));
  REQUIRE(app.settle());
  CHECK(app.tools.context_meter->usage().message_tokens > u.message_tokens);
}

TEST_CASE("gui context meter: the oldest messages that will not fit are marked", "[gui][model]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  std::string para;
  for (int i = 0; i < 12; ++i) para += "The harbour boats go out at dawn and come back with fish for the market. ";
  {
    specchat::ConversationStore s(db.toStdString());
    const int64_t c = s.create_conversation("long");
    for (int i = 0; i < 8; ++i) add(s, c, i % 2 ? "assistant" : "user", para);
  }
  App app(db);
  REQUIRE(app.settle());
  const ContextUsage u = app.tools.context_meter->usage();
  INFO("n_ctx " << u.n_ctx << ", prompt " << u.prompt_tokens());
  REQUIRE(u.n_dropped > 0);
  auto* view = app.window.findChild<ChatView*>(QStringLiteral("chatView"));
  CHECK(view->droppedRows() == u.n_dropped);  // no error rows here: one row per dropped message
  CHECK(view->toPlainText().contains(QStringLiteral("left out of the context")));
  CHECK(app.window.findChild<QLabel*>(QStringLiteral("contextMeterLabel"))->text().contains(QStringLiteral("left out")));
}
