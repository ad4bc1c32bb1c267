// What the app records beside the messages: one generations row per reply (mode, parameters,
// stats, accepted-length histogram), the loaded model files (size, SHA-256) and saved
// compare-view runs, all written on the storage thread.
#include <catch2/catch.hpp>

#include <QFileInfo>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>
#include <numeric>

#include "storage/conversation_store.h"
#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

using namespace specchat::ui;
using specchat::test::wait_until;

TEST_CASE("gui: a reply records its generation and the model files, a compare run is saved", "[gui][model]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  const std::string target = QFileInfo(QString::fromStdString(specchat::test::target_model())).absoluteFilePath().toStdString();
  const std::string draft = QFileInfo(QString::fromStdString(specchat::test::draft_model())).absoluteFilePath().toStdString();
  {
    EngineHost host;
    ChatController controller(host.worker(), db);
    REQUIRE(controller.isPersistent());
    GenerationSettings s;
    s.max_tokens = 12;
    s.draft_k = 3;
    controller.setSettings(s);
    host.loadModels(QString::fromStdString(target), QString::fromStdString(draft));
    controller.send(QStringLiteral("Tell me a story about a dog."));
    REQUIRE(wait_until([&] { return !controller.isBusy(); }, 60000));
    INFO(controller.statusText().toStdString());
    REQUIRE_FALSE(controller.statusIsError());

    specchat::CompareRecord rec;
    rec.prompt = "Tell me a story about a dog.";
    rec.params_json = R"({"draft_k":3})";
    rec.baseline_json = R"({"n_generated":12})";
    rec.speculative_json = R"({"n_generated":12})";
    rec.speedup = 1.5;
    rec.identical = true;
    rec.first_diff = -1;
    controller.saveCompareRun(rec);
    controller.flushStorage();
    REQUIRE(wait_until([&] { return controller.statusText().startsWith(QStringLiteral("Comparison saved")); }, 5000));
  }

  specchat::ConversationStore store(db.toStdString());
  const auto convs = store.list_conversations();
  REQUIRE(convs.size() == 1);
  const auto msgs = store.messages(convs.front().id);
  REQUIRE(msgs.size() == 2);
  const specchat::Message& reply = msgs[1];
  REQUIRE(reply.role == "assistant");
  const auto gens = store.generations(reply.id);
  REQUIRE(gens.size() == 1);
  CHECK(gens[0].mode == "speculative");
  const auto params = nlohmann::json::parse(gens[0].params_json);
  CHECK(params.at("draft_k") == 3);
  CHECK(params.at("max_tokens") == 12);
  const auto stats = nlohmann::json::parse(gens[0].stats_json);
  CHECK(stats.at("n_generated") == reply.stats.n_tokens);
  CHECK(stats.at("n_generated").get<int>() == static_cast<int>(reply.token_ids.size()));
  // One histogram entry per verification step, indexed by accepted drafts (0..k).
  REQUIRE(gens[0].accepted_hist.size() == 4);
  CHECK(std::accumulate(gens[0].accepted_hist.begin(), gens[0].accepted_hist.end(), 0) ==
        stats.at("n_steps").get<int>());

  for (const std::string& path : {target, draft}) {
    INFO(path);
    const auto m = store.model_by_path(path);
    REQUIRE(m.has_value());
    CHECK(m->size_bytes == static_cast<int64_t>(QFileInfo(QString::fromStdString(path)).size()));
    CHECK(m->sha256 == specchat::sha256_file(path));
    CHECK(m->architecture == "llama");
  }

  const auto runs = store.compare_runs();
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].identical);
  CHECK(runs[0].speedup == Approx(1.5));
  CHECK(runs[0].prompt == "Tell me a story about a dog.");
}
