// PIPO in the desktop app (issue 16, docs/design/pipo.md): the setting is off by default and
// persists; a PIPO reply streams, is labelled "approximate: not verified by the target" (also
// after a restart), its latents are stored beside it and the next turn continues them (from
// memory, and from the database after a restart); the live panel shows PIPO's figures; a mixed
// release, or one made from another target, shows its error and generates nothing; Compare runs
// baseline vs PIPO. The release unit is the tiny test unit (pipo_fixture.h) bound to the
// bundled target's sha256.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QLabel>
#include <QSpinBox>
#include <QTemporaryDir>

#include <memory>

#include "engine/drafters/sha256.h"
#include "engine/pipo/pipo_fixture.h"
#include "engine/pipo/pipo_history.h"
#include "storage/conversation_store.h"
#include "storage/export.h"
#include "test_paths.h"
#include "tests/ui/gui_model_app.h"
#include "tests/ui/gui_test_util.h"
#include "ui/analysis_tools.h"
#include "ui/chat_view.h"
#include "ui/compare_view.h"
#include "ui/live_panel.h"
#include "ui/settings.h"
#include "ui/settings_dialog.h"

using namespace specchat::ui;
using specchat::ConversationStore;
using specchat::test::PipoFixture;
using specchat::test::wait_until;

namespace {

constexpr int kTimeoutMs = 90000;
constexpr int kWaitMs = 10000;
const QString kLabel = QString::fromUtf8(kPipoLabel);

// A unit made from the bundled target (so the app accepts it with that target loaded).
struct BoundUnit {
  PipoFixture f{1024};  // the bundled target's context
  BoundUnit() {
    f.target_sha = specchat::sha256_file_hex(specchat::test::target_model());
    f.write();
  }
  QString dir() const { return QString::fromStdString(f.dir.path.string()); }
};

GenerationSettings pipo_settings(const QString& release) {
  GenerationSettings s;
  s.max_tokens = 8;
  s.pipo.enabled = true;
  s.pipo.release = release;
  s.pipo.threshold = 0.3f;  // the random heads keep some second tokens
  return s;
}

// The assistant messages of `conv` on its active path, with their latents.
std::vector<std::pair<specchat::Message, std::optional<specchat::MessageLatents>>> replies(const QString& db, qint64 conv) {
  ConversationStore store(db.toStdString());
  std::vector<std::pair<specchat::Message, std::optional<specchat::MessageLatents>>> out;
  for (const specchat::Message& m : store.messages(conv)) {
    if (m.role == "assistant") out.emplace_back(m, store.message_latents(m.id));
  }
  return out;
}

nlohmann::json last_record_stats(const QString& db, int64_t message_id) {
  ConversationStore store(db.toStdString());
  const auto g = store.generations(message_id);
  REQUIRE_FALSE(g.empty());
  CHECK(g.back().mode == "pipo");
  return nlohmann::json::parse(g.back().stats_json);
}

}  // namespace

TEST_CASE("gui pipo: the setting is off by default, persists, and the dialog labels it approximate", "[gui][unit][pipo]") {
  QTemporaryDir dir;
  const QString file = dir.filePath(QStringLiteral("settings.ini"));
  CHECK_FALSE(AppSettings{}.generation.pipo.enabled);
  CHECK_FALSE(load_settings(file).generation.pipo.enabled);  // nothing saved yet
  CHECK(load_settings(file).generation.pipo.threshold < 0);  // the release's recommendation

  AppSettings s;
  s.generation.pipo.enabled = true;
  s.generation.pipo.release = QStringLiteral("/releases/pipo-1");
  s.generation.pipo.threshold = 0.7f;
  s.generation.pipo.raw_context = 512;
  REQUIRE(save_settings(s, file));
  const PipoChoice back = load_settings(file).generation.pipo;
  CHECK(back.enabled);
  CHECK(back.release == QStringLiteral("/releases/pipo-1"));
  CHECK(back.threshold == Approx(0.7f));
  CHECK(back.raw_context == 512);
  s.generation.pipo.enabled = false;
  s.generation.pipo.threshold = -1.0f;
  REQUIRE(save_settings(s, file));
  CHECK_FALSE(load_settings(file).generation.pipo.enabled);
  CHECK(load_settings(file).generation.pipo.threshold < 0);

  // The dialog: the switch is off, says "approximate" beside it, pair size / extra tokens fixed.
  SettingsDialog dialog(AppSettings{});
  auto* check = dialog.findChild<QCheckBox*>(QStringLiteral("pipoEnableCheck"));
  REQUIRE(check != nullptr);
  CHECK_FALSE(check->isChecked());
  CHECK(dialog.findChild<QLabel*>(QStringLiteral("pipoLabel"))->text() == kLabel);
  CHECK(dialog.findChild<QLabel*>(QStringLiteral("pipoPairSize"))->text().startsWith(QStringLiteral("2")));
  CHECK(dialog.findChild<QLabel*>(QStringLiteral("pipoExtraTokens"))->text().startsWith(QStringLiteral("1")));
  auto* threshold = dialog.findChild<QDoubleSpinBox*>(QStringLiteral("pipoThresholdSpin"));
  CHECK_FALSE(threshold->isEnabled());  // only with PIPO on
  CHECK_FALSE(dialog.settings().generation.pipo.enabled);
  CHECK(dialog.settings().generation.pipo.threshold < 0);

  // A release folder: its manifest's release and recommended threshold, the derived latent limit.
  PipoFixture f{256};
  f.write();
  AppSettings with;
  with.generation.pipo.release = QString::fromStdString(f.dir.path.string());
  SettingsDialog d2(with);
  d2.findChild<QCheckBox*>(QStringLiteral("pipoEnableCheck"))->setChecked(true);
  CHECK(d2.findChild<QDoubleSpinBox*>(QStringLiteral("pipoThresholdSpin"))->isEnabled());
  CHECK(d2.findChild<QLabel*>(QStringLiteral("pipoReleaseInfo"))->text().contains(QStringLiteral("test-release-1")));
  d2.findChild<QSpinBox*>(QStringLiteral("pipoRawContextSpin"))->setValue(200);
  CHECK(d2.findChild<QLabel*>(QStringLiteral("pipoLatentLabel"))->text().startsWith(QStringLiteral("200 pairs")));
  d2.findChild<QDoubleSpinBox*>(QStringLiteral("pipoThresholdSpin"))->setValue(0.4);
  const PipoChoice chosen = d2.settings().generation.pipo;
  CHECK(chosen.enabled);
  CHECK(chosen.threshold == Approx(0.4f));
  CHECK(chosen.raw_context == 200);
}

TEST_CASE("gui pipo: records, labels, history and quality lines", "[gui][unit][pipo]") {
  // A PIPO reply's stored record comes back as PIPO live stats (the panel after a restart).
  GenerationSummary s;
  s.pipo = true;
  s.tokens = {5, 6, 7};
  s.finish = QStringLiteral("eos");
  s.pipo_live.release = QStringLiteral("rel-1");
  s.pipo_live.steps = 2;
  s.pipo_live.head_runs = 2;
  s.pipo_live.accepted = 1;
  s.pipo_live.raw_tokens = 4;
  s.pipo_live.latent_length = 9;
  s.pipo_live.raw_length = 15;
  s.pipo_live.reused_pairs = 6;
  s.pipo_live.from_latents = true;
  s.pipo_live.tpot_ms = 4;
  s.pipo_live.threshold = 0.6f;
  const specchat::GenerationRecord rec = to_generation_record(s, GenerationSettings{});
  CHECK(rec.mode == "pipo");
  const LiveStats back = live_stats_from_record(rec);
  CHECK(back.pipo);
  CHECK(back.pipo_live.release == QStringLiteral("rel-1"));
  CHECK(back.pipo_live.acceptance_rate() == Approx(0.5));
  CHECK(back.pipo_live.tokens_per_step() == Approx(2.0));
  CHECK(back.pipo_live.reused_pairs == 6);
  CHECK(back.pipo_live.from_latents);
  CHECK(back.pipo_live.threshold == Approx(0.6f));
  // The stats line starts with the label; a lossless one never has it.
  const specchat::MessageStats ms = to_message_stats(s);
  CHECK(ms.mode == "pipo");
  CHECK(ms.tokens_per_s == Approx(250.0));
  CHECK(format_stats(ms).startsWith(kLabel));
  CHECK_FALSE(format_stats(to_message_stats(specchat::GenerationStats{}, true)).contains(kLabel));

  // The history: the last entry with latents wins; a reply without them after it is "lossless".
  auto none = [](const PipoHistoryEntry&) { return std::optional<specchat::MessageLatents>(); };
  PipoHistoryEntry a{1, true, {1, 2}, "r"}, b{2, false, {}, ""}, c{3, true, {1, 2, 3, -1}, "r"};
  PipoHistory h = resolve_pipo_history({a, b}, none);
  CHECK(h.found);
  CHECK(h.pairs == std::vector<int32_t>{1, 2});
  CHECK(h.later_lossless);
  h = resolve_pipo_history({a, b, c}, none);
  CHECK(h.pairs.size() == 4);
  CHECK_FALSE(h.later_lossless);
  h = resolve_pipo_history({b}, none);
  CHECK_FALSE(h.found);
  CHECK(h.later_lossless);
  // From the database when not in memory.
  h = resolve_pipo_history({a, b}, [](const PipoHistoryEntry& e) {
    return e.id == 2 ? std::optional<specchat::MessageLatents>(specchat::MessageLatents{"db", {7, -1}}) : std::nullopt;
  });
  CHECK(h.release == "db");
  CHECK_FALSE(h.later_lossless);

  // Quality: scalars, and the per-threshold entry nearest the threshold in force.
  const QString q = format_pipo_quality(
      QStringLiteral(R"({"kl": 0.13, "gate_passed": false, "evaluated_by": "a long sentence that says how it was evaluated",)"
                     R"( "per_threshold": {"0.5": {"ppl_ratio": 1.21}, "0.85": {"ppl_ratio": 1.24}}})"),
      0.8f);
  CHECK(q.contains(QStringLiteral("kl 0.13")));
  CHECK(q.contains(QStringLiteral("gate_passed false")));
  CHECK_FALSE(q.contains(QStringLiteral("long sentence")));
  CHECK(q.contains(QStringLiteral("per_threshold@0.80.ppl_ratio 1.24")));
  CHECK(format_pipo_quality(QStringLiteral("not json"), 0.5f).isEmpty());
}

TEST_CASE("gui pipo: a reply is labelled approximate, its latents are stored, the next turn continues them",
          "[gui][model][pipo]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  BoundUnit unit;
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  const GenerationSettings s = pipo_settings(unit.dir());
  qint64 conv = 0;
  std::vector<int32_t> second_pairs;
  {
    specchat::test::ModelApp app(db, s);
    const AnalysisTools tools = install_analysis_tools(app.window, app.engine.worker(), &app.controller);
    // The status line says which PIPO parts loaded.
    REQUIRE(wait_until([&] { return app.controller.pipoStatus().loaded; }, kTimeoutMs));
    REQUIRE(wait_until([&] { return app.controller.statusText().contains(QStringLiteral("PIPO test-release-1")); }, kWaitMs));
    const QString status = app.controller.statusText();
    CHECK(status.contains(QStringLiteral("backbone \u2713")));
    CHECK(status.contains(QStringLiteral("MTP head \u2713")));
    CHECK(status.contains(QStringLiteral("compressor + confidence head \u2713")));
    CHECK(status.contains(kLabel));

    int streamed = 0;
    QObject::connect(app.engine.worker(), &EngineWorker::tokenGenerated, &app.controller,
                     [&](quint64, const QString&, bool, int) { ++streamed; }, Qt::QueuedConnection);
    app.controller.send(QStringLiteral("Tell me a story."));
    REQUIRE(app.waitIdle());
    ChatModel* model = app.controller.model();
    REQUIRE(model->rowCount() == 2);
    const ChatItem& reply = model->item(1);
    INFO(reply.text.toStdString());
    REQUIRE(reply.role == QStringLiteral("assistant"));
    CHECK(streamed > 0);  // it streamed like the other modes
    CHECK(reply.stats.mode == "pipo");
    CHECK(model->data(model->index(1), ChatModel::StatsTextRole).toString().startsWith(kLabel));
    auto* view = app.window.findChild<ChatView*>(QStringLiteral("chatView"));
    CHECK(view->toPlainText().contains(kLabel));
    // The live panel shows PIPO's own figures.
    REQUIRE(wait_until([&] { return tools.live_panel->stats().pipo && tools.live_panel->stats().finished; }, kWaitMs));
    const PipoLive& live = tools.live_panel->stats().pipo_live;
    CHECK(live.release == QStringLiteral("test-release-1"));
    CHECK(live.steps > 0);
    CHECK(live.latent_length <= live.raw_length);
    CHECK(live.ttft_ms > 0);
    CHECK(tools.live_panel->findChild<QWidget*>(QStringLiteral("livePipoBox"))->isVisibleTo(tools.live_panel));
    CHECK(tools.live_panel->findChild<QLabel*>(QStringLiteral("livePipoLabel"))->text() == kLabel);
    CHECK(tools.live_panel->findChild<QLabel*>(QStringLiteral("livePipoRelease"))->text() == QStringLiteral("test-release-1"));

    // Stored: mode "pipo", and the pair sequence beside the reply.
    conv = app.controller.conversationId();
    app.controller.flushStorage();
    auto r1 = replies(db, conv);
    REQUIRE(r1.size() == 1);
    CHECK(r1[0].first.stats.mode == "pipo");
    REQUIRE(r1[0].second.has_value());
    const specchat::MessageLatents l1 = *r1[0].second;
    CHECK(l1.release == "test-release-1");
    CHECK(l1.pairs.size() % 2 == 0);
    // The pairs' raw ids end with the reply's ids (an end-of-turn token may follow).
    const std::vector<int32_t> raw1 = specchat::pairs_to_raw(l1.pairs);
    const std::vector<int32_t>& ids1 = r1[0].first.token_ids;
    REQUIRE_FALSE(ids1.empty());
    CHECK(std::search(raw1.begin(), raw1.end(), ids1.begin(), ids1.end()) != raw1.end());
    CHECK(last_record_stats(db, r1[0].first.id)["from_latents"] == false);
    {  // An export says it too.
      ConversationStore store(db.toStdString());
      CHECK(specchat::export_markdown(*store.conversation(conv), store.all_messages(conv)).find(kPipoLabel) !=
            std::string::npos);
    }

    // The second turn continues those latents, with the first turn's pairs still in the cache.
    app.controller.send(QStringLiteral("And then?"));
    REQUIRE(app.waitIdle());
    REQUIRE(app.controller.model()->rowCount() == 4);
    CHECK(app.controller.model()->item(3).stats.mode == "pipo");
    CHECK(app.controller.model()->item(3).notice.isEmpty());  // continued: nothing to say
    app.controller.flushStorage();
    auto r2 = replies(db, conv);
    REQUIRE(r2.size() == 2);
    REQUIRE(r2[1].second.has_value());
    second_pairs = r2[1].second->pairs;
    REQUIRE(second_pairs.size() > l1.pairs.size());
    CHECK(std::equal(l1.pairs.begin(), l1.pairs.end(), second_pairs.begin()));  // the exact latents, not re-paired
    const nlohmann::json st2 = last_record_stats(db, r2[1].first.id);
    CHECK(st2["from_latents"] == true);
    CHECK(st2["reused_pairs"].get<int>() > 0);
    CHECK(tools.live_panel->stats().pipo_live.reused_pairs > 0);
  }
  // After a restart: still labelled, and the third turn continues the stored latents.
  specchat::test::ModelApp again(db, s);
  REQUIRE(wait_until([&] { return again.controller.model()->rowCount() == 4; }, kWaitMs));
  CHECK(again.controller.model()->item(1).stats.mode == "pipo");
  REQUIRE(wait_until([&] { return again.window.findChild<ChatView*>(QStringLiteral("chatView"))->toPlainText().contains(kLabel); },
                     kWaitMs));
  REQUIRE(wait_until([&] { return again.controller.pipoStatus().loaded; }, kTimeoutMs));
  again.controller.send(QStringLiteral("The end."));
  REQUIRE(again.waitIdle());
  REQUIRE(again.controller.model()->rowCount() == 6);
  again.controller.flushStorage();
  auto r3 = replies(db, conv);
  REQUIRE(r3.size() == 3);
  REQUIRE(r3[2].second.has_value());
  CHECK(std::equal(second_pairs.begin(), second_pairs.end(), r3[2].second->pairs.begin()));
  CHECK(last_record_stats(db, r3[2].first.id)["from_latents"] == true);

  // PIPO off: the next reply is lossless and the chat says the target re-prefills.
  GenerationSettings off = s;
  off.pipo.enabled = false;
  again.controller.setSettings(off);
  again.controller.send(QStringLiteral("Plainly now."));
  REQUIRE(again.waitIdle());
  REQUIRE(again.controller.model()->rowCount() == 8);
  CHECK(again.controller.model()->item(7).stats.mode != "pipo");
  CHECK_FALSE(again.controller.model()->item(7).notice.isEmpty());
  // And back on: PIPO re-prefills after the lossless reply, and says so under the reply.
  again.controller.setSettings(s);
  again.controller.send(QStringLiteral("Once more."));
  REQUIRE(again.waitIdle());
  REQUIRE(again.controller.model()->rowCount() == 10);
  CHECK(again.controller.model()->item(9).stats.mode == "pipo");
  CHECK(again.controller.model()->item(9).notice.contains(QStringLiteral("re-prefilled")));
  again.controller.flushStorage();
  const auto r5 = replies(db, conv);
  REQUIRE(r5.size() == 5);
  CHECK_FALSE(r5[3].second.has_value());  // the lossless reply has no latents
  CHECK(last_record_stats(db, r5[4].first.id)["from_latents"] == false);
}

TEST_CASE("gui pipo: a mixed release, or one from another target, shows its error and generates nothing",
          "[gui][model][pipo]") {
  REQUIRE(QFileInfo::exists(QString::fromStdString(specchat::test::target_model())));
  // (A fixture's folder is named by the process id: one fixture at a time.)
  auto mixed = std::make_unique<PipoFixture>(1024);
  mixed->target_sha = specchat::sha256_file_hex(specchat::test::target_model());
  mixed->part_release["mtp"] = "other-release";
  mixed->write();
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  specchat::test::ModelApp app(db, pipo_settings(QString::fromStdString(mixed->dir.path.string())));
  REQUIRE(wait_until([&] { return !app.controller.pipoStatus().error.isEmpty(); }, kTimeoutMs));
  CHECK(app.controller.pipoStatus().error.contains(QStringLiteral("other-release")));
  CHECK_FALSE(app.controller.pipoStatus().loaded);
  int streamed = 0;
  QObject::connect(app.engine.worker(), &EngineWorker::tokenGenerated, &app.controller,
                   [&](quint64, const QString&, bool, int) { ++streamed; }, Qt::QueuedConnection);

  app.controller.send(QStringLiteral("Hello?"));
  REQUIRE(app.waitIdle());
  QTest::qWait(50);  // any late token would have arrived
  CHECK(streamed == 0);  // never decoded plainly instead
  ChatModel* model = app.controller.model();
  REQUIRE(model->rowCount() == 2);  // the message and the error bubble
  CHECK(model->item(1).role == QStringLiteral("error"));
  CHECK(model->item(1).text.contains(QStringLiteral("PIPO release refused")));
  CHECK(model->item(1).text.contains(QStringLiteral("other-release")));
  CHECK(app.controller.statusIsError());
  CHECK(app.window.findChild<QLabel*>(QStringLiteral("errorBanner"))->isVisible());
  app.controller.flushStorage();
  CHECK(replies(db, app.controller.conversationId()).empty());

  // A unit made from another target: refused with the target's hash in the message.
  mixed.reset();
  PipoFixture foreign{1024};  // target_sha "aaaa…", not the bundled target's
  foreign.write();
  app.controller.setSettings(pipo_settings(QString::fromStdString(foreign.manifest())));  // the manifest itself
  const bool refused =
      wait_until([&] { return app.controller.pipoStatus().error.contains(QStringLiteral("was made from")); }, kTimeoutMs);
  INFO(app.controller.pipoStatus().error.toStdString());
  REQUIRE(refused);
  app.controller.regenerate();  // the user's message still has no reply
  REQUIRE(app.waitIdle());
  QTest::qWait(50);
  CHECK(streamed == 0);
  REQUIRE(model->rowCount() == 2);
  CHECK(model->item(1).role == QStringLiteral("error"));
  CHECK(model->item(1).text.contains(QStringLiteral("was made from")));
  app.controller.flushStorage();
  CHECK(replies(db, app.controller.conversationId()).empty());
}

TEST_CASE("gui pipo: compare runs baseline vs PIPO with its divergence and the release's quality", "[gui][model][pipo]") {
  BoundUnit unit;
  EngineHost host;
  host.loadModels(QString::fromStdString(specchat::test::target_model()),
                  QString::fromStdString(specchat::test::draft_model()));
  CompareView view(host.worker());
  view.setSettings(pipo_settings(unit.dir()));
  view.setPrompt(QStringLiteral("Tell me a short story about a cat."));
  view.show();
  view.run();
  REQUIRE(wait_until([&] { return view.hasResult(); }, kTimeoutMs));
  const CompareResult& r = view.result();
  INFO(r.error.toStdString());
  REQUIRE(r.error.isEmpty());
  CHECK(r.pipo);
  CHECK(r.baseline.stats.n_generated > 0);
  CHECK(r.speculative.stats.n_generated > 0);
  CHECK(r.pipo_live.release == QStringLiteral("test-release-1"));
  CHECK(r.pipo_live.steps > 0);
  // A random backbone diverges from the target: the verdict names the first differing token.
  CHECK_FALSE(r.identical);
  CHECK(r.first_diff >= 0);
  const QString verdict = view.findChild<QLabel*>(QStringLiteral("compareVerdict"))->text();
  CHECK(verdict.contains(QStringLiteral("diverges from the baseline at token %1").arg(r.first_diff)));
  CHECK(verdict.contains(kLabel));
  CHECK(view.findChild<QLabel*>(QStringLiteral("compareSpeculativeHeader"))->text().contains(kLabel));
  auto* quality = view.findChild<QLabel*>(QStringLiteral("compareQuality"));
  CHECK(quality->isVisibleTo(&view));
  CHECK(quality->text().contains(QStringLiteral("note test")));
  CHECK(view.findChild<QLabel*>(QStringLiteral("compareSpeculativeStats"))->text().contains(QStringLiteral("TPOT")));
  const specchat::CompareRecord rec = to_compare_record(r);
  CHECK(rec.speculative_json.find("\"approximate\":true") != std::string::npos);
}

TEST_CASE("gui pipo: an empty release folder means the bundled release, at its recommended threshold", "[gui][model][pipo]") {
  if (bundled_pipo_release().isEmpty()) {
    WARN("SKIPPED: no bundled PIPO release (resources/models/pipo)");
    return;
  }
  QTemporaryDir dir;
  GenerationSettings s;
  s.max_tokens = 6;
  s.pipo.enabled = true;  // release "" = bundled, threshold < 0 = the release's
  specchat::test::ModelApp app(dir.filePath(QStringLiteral("chat.sqlite")), s);
  REQUIRE(wait_until([&] { return app.controller.pipoStatus().loaded || !app.controller.pipoStatus().error.isEmpty(); },
                     kTimeoutMs));
  const PipoStatus st = app.controller.pipoStatus();
  INFO(st.error.toStdString());
  REQUIRE(st.loaded);
  CHECK(st.folder == bundled_pipo_release());
  CHECK(st.threshold == Approx(read_pipo_manifest(st.folder).recommended_threshold));
  CHECK_FALSE(st.release.isEmpty());
  app.controller.send(QStringLiteral("Tell me a story."));
  REQUIRE(app.waitIdle());
  REQUIRE(app.controller.model()->rowCount() == 2);
  CHECK(app.controller.model()->item(1).stats.mode == "pipo");
}

TEST_CASE("gui pipo: Continue resumes a cut PIPO reply from its latents", "[gui][model][pipo]") {
  BoundUnit unit;
  QTemporaryDir dir;
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  GenerationSettings s = pipo_settings(unit.dir());
  s.max_tokens = 4;
  s.pipo.threshold = 1.0f;  // one token per step: the cut comes at exactly 4 tokens
  specchat::test::ModelApp app(db, s);
  REQUIRE(wait_until([&] { return app.controller.pipoStatus().loaded; }, kTimeoutMs));
  app.controller.send(QStringLiteral("Count to ten."));
  REQUIRE(app.waitIdle());
  REQUIRE(app.controller.model()->rowCount() == 2);
  const ChatItem cut = app.controller.model()->item(1);
  if (cut.finish != QStringLiteral("length")) {
    WARN("SKIPPED: the random backbone ended its reply early");
    return;
  }
  REQUIRE(app.controller.canContinue());
  app.controller.continueReply();
  REQUIRE(app.waitIdle());
  REQUIRE(app.controller.model()->rowCount() == 2);
  const ChatItem joined = app.controller.model()->item(1);
  CHECK(joined.stats.mode == "pipo");
  CHECK(joined.token_ids.size() > cut.token_ids.size());
  CHECK(std::equal(cut.token_ids.begin(), cut.token_ids.end(), joined.token_ids.begin()));
  app.controller.flushStorage();
  const auto r = replies(db, app.controller.conversationId());
  REQUIRE(r.size() == 1);  // the continued reply replaced the cut one on the path
  REQUIRE(r[0].second.has_value());
  CHECK(specchat::pairs_to_raw(r[0].second->pairs).size() > cut.token_ids.size());
  CHECK(last_record_stats(db, r[0].first.id)["from_latents"] == true);
}

TEST_CASE("gui pipo: the fidelity gauge shows the KL of token 1 in the live panel", "[gui][model][pipo]") {
  // Issue 16 "Monitoring": the live panel had no fidelity gauge (the CLI's --pipo-fidelity only).
  BoundUnit unit;
  QTemporaryDir dir;
  GenerationSettings s = pipo_settings(unit.dir());
  s.max_tokens = 12;
  s.pipo.fidelity_every = 2;
  {  // the setting round trips
    AppSettings a;
    a.generation = s;
    REQUIRE(save_settings(a, dir.filePath(QStringLiteral("s.ini"))));
    CHECK(load_settings(dir.filePath(QStringLiteral("s.ini"))).generation.pipo.fidelity_every == 2);
    SettingsDialog d(a);
    auto* spin = d.findChild<QSpinBox*>(QStringLiteral("pipoFidelitySpin"));
    REQUIRE(spin);
    CHECK(spin->value() == 2);
    spin->setValue(0);
    CHECK(d.settings().generation.pipo.fidelity_every == 0);
  }
  specchat::test::ModelApp app(dir.filePath(QStringLiteral("chat.sqlite")), s);
  const AnalysisTools tools = install_analysis_tools(app.window, app.engine.worker(), &app.controller);
  REQUIRE(wait_until([&] { return app.controller.pipoStatus().loaded; }, kTimeoutMs));
  app.controller.send(QStringLiteral("Tell me a story."));
  REQUIRE(app.waitIdle());
  REQUIRE(wait_until([&] { return tools.live_panel->stats().pipo && tools.live_panel->stats().finished; }, kWaitMs));
  const PipoLive& live = tools.live_panel->stats().pipo_live;
  CHECK(live.fidelity_every == 2);
  CHECK(live.fidelity_samples >= 1);
  CHECK(live.fidelity_samples <= live.steps);
  CHECK(live.fidelity_mean_kl >= 0);
  CHECK(live.fidelity_max_kl >= live.fidelity_mean_kl);
  const QString text = tools.live_panel->findChild<QLabel*>(QStringLiteral("livePipoFidelity"))->text();
  INFO(text.toStdString());
  CHECK(text.contains(QStringLiteral("nats mean")));
  CHECK(text.contains(QStringLiteral("1 step in 2")));
}
