// Live statistics and the draft visualization: the worker's statsUpdated snapshots (value
// types on the GUI thread, throttled, a final one before generationFinished), the tree
// settings it applies, the live panel, and ChatView's drafted / target token formats.
#include <catch2/catch.hpp>

#include <QApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QSignalSpy>
#include <QTextBlock>
#include <QTextDocument>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <algorithm>
#include <vector>

#include "engine/model_pair.h"
#include "storage/conversation_store.h"
#include "test_paths.h"
#include "tests/ui/gui_test_util.h"
#include "ui/analysis_tools.h"
#include "ui/chat_controller.h"
#include "ui/chat_model.h"
#include "ui/chat_view.h"
#include "ui/engine_worker.h"
#include "ui/live_panel.h"
#include "ui/main_window.h"
#include "ui/piece_rebuilder.h"
#include "ui/spec_setup.h"
#include "ui/stat_charts.h"

using namespace specchat::ui;
using specchat::test::wait_until;

namespace {

constexpr int kTimeoutMs = 60000;

QString target() { return QString::fromStdString(specchat::test::target_model()); }
QString draft() { return QString::fromStdString(specchat::test::draft_model()); }

// What one generate job sent to the GUI thread, in arrival order.
struct Recorder {
  std::vector<LiveStats> snapshots;
  int snapshots_before_finish = -1;  // snapshots received when generationFinished arrived
  bool all_on_gui_thread = true;
  bool finished = false;
  GenerationSummary summary;
};

// Runs one job on `host` and records its signals; the panel (when given) is fed too.
Recorder run_job(EngineHost& host, const GenerationSettings& settings, LivePanel* panel = nullptr) {
  Recorder rec;
  QObject ctx;
  EngineWorker* w = host.worker();
  QObject::connect(w, &EngineWorker::statsUpdated, &ctx, [&rec](const LiveStats& s) {
    rec.all_on_gui_thread = rec.all_on_gui_thread && QThread::currentThread() == qApp->thread();
    rec.snapshots.push_back(s);
  });
  if (panel) QObject::connect(w, &EngineWorker::statsUpdated, panel, &LivePanel::setStats);
  QObject::connect(w, &EngineWorker::generationFinished, &ctx, [&rec](const GenerationSummary& s) {
    rec.snapshots_before_finish = static_cast<int>(rec.snapshots.size());
    rec.summary = s;
    rec.finished = true;
  });
  GenerateJob job;
  job.id = 7;
  job.messages = {{"user", "Tell me a short story about a cat."}};
  job.settings = settings;
  QMetaObject::invokeMethod(w, [w, job] { w->generate(job); }, Qt::QueuedConnection);
  REQUIRE(wait_until([&] { return rec.finished; }, kTimeoutMs));
  if (panel) QObject::disconnect(w, &EngineWorker::statsUpdated, panel, &LivePanel::setStats);
  return rec;
}

GenerationSettings small_settings() {
  GenerationSettings s;
  s.max_tokens = 20;
  s.draft_k = 4;
  return s;
}

// The char format of the first character of `needle` in `doc` (REQUIREs that it is there).
QTextCharFormat format_of(QTextDocument* doc, const QString& needle, int* pos = nullptr) {
  const QTextCursor found = doc->find(needle);
  REQUIRE_FALSE(found.isNull());
  QTextCursor c(doc);
  c.setPosition(found.selectionStart() + 1);
  if (pos) *pos = found.selectionStart();
  return c.charFormat();
}

}  // namespace

TEST_CASE("gui: live panel updates while generating and keeps the final numbers", "[gui][model]") {
  EngineHost host;
  host.worker()->setStatsIntervalMs(0);  // one snapshot per token: the tiny model is fast
  host.loadModels(target(), draft());
  LivePanel panel;
  const Recorder rec = run_job(host, small_settings(), &panel);
  REQUIRE(rec.summary.finish != QStringLiteral("error"));
  REQUIRE(rec.summary.stats.n_generated > 2);
  CHECK(rec.all_on_gui_thread);
  // Several running snapshots, then exactly one final one, all before generationFinished.
  REQUIRE(rec.snapshots_before_finish == static_cast<int>(rec.snapshots.size()));
  REQUIRE(rec.snapshots.size() >= 3);
  for (size_t i = 0; i + 1 < rec.snapshots.size(); ++i) CHECK_FALSE(rec.snapshots[i].finished);
  const LiveStats& last = rec.snapshots.back();
  CHECK(last.finished);
  CHECK(last.job_id == 7);
  // Running totals only grow.
  for (size_t i = 1; i < rec.snapshots.size(); ++i) {
    CHECK(rec.snapshots[i].stats.n_generated >= rec.snapshots[i - 1].stats.n_generated);
  }
  CHECK(last.stats.n_generated == rec.summary.stats.n_generated);
  CHECK(last.stats.n_accepted == rec.summary.stats.n_accepted);
  CHECK(static_cast<int>(last.tps_history.size()) == rec.summary.stats.n_generated);
  CHECK(last.speculative);
  CHECK(last.drafter == QStringLiteral("draft model"));
  CHECK(last.tree_mode == QStringLiteral("chain"));
  CHECK(last.node_budget == 4);
  CHECK(last.kv_bytes > 0);
  CHECK(last.rss_bytes > 0);
  CHECK(last.vram_total_bytes == 0);  // CPU backend

  // The panel shows the final snapshot and keeps it.
  CHECK(panel.updateCount() == static_cast<int>(rec.snapshots.size()));
  CHECK(panel.stats().finished);
  const specchat::GenerationStats& g = rec.summary.stats;
  auto text = [&](const char* name) { return panel.findChild<QLabel*>(QString::fromLatin1(name))->text(); };
  CHECK(text("liveTokensPerS") == QStringLiteral("%1 tok/s").arg(g.tokens_per_s(), 0, 'f', 1));
  CHECK(text("liveAlpha") == QString::number(g.acceptance_rate(), 'f', 2));
  CHECK(text("liveTau") == QString::number(g.mean_accepted_length(), 'f', 2));
  CHECK(text("liveCounts").startsWith(QStringLiteral("%1 / %2").arg(g.n_drafted).arg(g.n_accepted)));
  CHECK(text("liveDrafter") == QStringLiteral("draft model"));
  CHECK(text("liveMemory").startsWith(QStringLiteral("RSS ")));
  CHECK(panel.findChild<Histogram*>(QStringLiteral("liveHistogram"))->counts() == g.accepted_hist);
  CHECK(panel.findChild<Sparkline*>(QStringLiteral("liveSparkline"))->values().size() ==
        static_cast<size_t>(g.n_generated));
  panel.show();
  panel.grab();  // paints every chart with real data
}

TEST_CASE("gui: statsUpdated is throttled to about every 50 ms", "[gui][model]") {
  EngineHost host;
  host.loadModels(target(), draft());
  QElapsedTimer t;
  t.start();
  const Recorder rec = run_job(host, small_settings());
  const qint64 ms = t.elapsed();
  REQUIRE_FALSE(rec.snapshots.empty());
  CHECK(rec.snapshots.back().finished);
  // Running snapshots are at least 50 ms apart, so there are at most ms / 50 of them.
  CHECK(static_cast<qint64>(rec.snapshots.size()) - 1 <= ms / 50);
}

TEST_CASE("gui: worker applies the tree settings", "[gui][model]") {
  EngineHost host;
  host.loadModels(target(), draft());
  GenerationSettings s = small_settings();
  s.tree_mode = specchat::TreeMode::dynamic;
  s.node_budget = 8;
  s.tree_depth = 3;
  s.max_tokens = 12;
  Recorder rec = run_job(host, s);
  REQUIRE(rec.summary.finish != QStringLiteral("error"));
  LiveStats last = rec.snapshots.back();
  CHECK(last.tree_mode == QStringLiteral("dynamic"));
  CHECK(last.node_budget == 8);
  CHECK(last.tree_depth == 3);
  CHECK(last.stats.accepted_hist.size() == 4u);  // accepted lengths 0..depth
  CHECK(last.warnings.isEmpty());

  s.tree_mode = specchat::TreeMode::optimal;  // the bundled draft has a calibration
  rec = run_job(host, s);
  last = rec.snapshots.back();
  CHECK(last.tree_mode == QStringLiteral("optimal"));
  CHECK(last.warnings.isEmpty());

  // The n-gram drafter has no acceptance by rank: its optimal tree takes the prior's Sequoia
  // shape, with a warning (every drafter drafts every shape).
  s.drafter = specchat::DrafterKind::ngram;
  rec = run_job(host, s);
  last = rec.snapshots.back();
  CHECK(last.drafter == QStringLiteral("n-gram"));
  CHECK(last.tree_mode == QStringLiteral("optimal"));
  REQUIRE(last.warnings.size() == 1);
  CHECK(last.warnings.front().contains(QStringLiteral("prior")));

  s.draft_k = 0;  // baseline
  rec = run_job(host, s);
  last = rec.snapshots.back();
  CHECK_FALSE(last.speculative);
  CHECK(last.drafter == QStringLiteral("none"));
  CHECK(last.stats.n_drafted == 0);
}

// RequestPlanner's one fallback (shared with the CLI): without a calibration the optimal tree is
// planned from the prior acceptance vector a[r] = 0.5^(r+1), with a warning. (The app used to
// switch to a dynamic tree here.)
TEST_CASE("gui: optimal tree without calibration uses the prior acceptance vector", "[gui][model]") {
  specchat::PairOptions o;
  o.target_path = specchat::test::target_model();
  o.draft_path = specchat::test::target_model();  // a draft with no calibration file beside it
  const specchat::ModelPair pair = specchat::ModelPair::load(o);
  GenerationSettings s;
  s.tree_mode = specchat::TreeMode::optimal;
  s.node_budget = 6;
  s.tree_depth = 9;  // deeper than the budget: clamped
  const SpecSetup setup = plan_spec(s, pair);
  CHECK(setup.speculative);
  CHECK(setup.spec.tree.mode == specchat::TreeMode::optimal);
  CHECK(setup.tree_mode == QStringLiteral("optimal"));
  CHECK(setup.node_budget == 6);
  // The depth shown is the tree's own (the prior's best 6 nodes are 3 deep), within the clamp.
  int deepest = 0;
  std::vector<int> depth_of;
  for (int32_t parent : setup.spec.tree.shape_parent) {
    depth_of.push_back(parent < 0 ? 1 : depth_of[static_cast<size_t>(parent)] + 1);
    deepest = std::max(deepest, depth_of.back());
  }
  CHECK(setup.depth == deepest);
  CHECK(setup.depth <= 6);
  CHECK_FALSE(setup.spec.tree.shape_parent.empty());
  CHECK(setup.spec.tree.shape_parent.size() <= 6u);
  REQUIRE(setup.warnings.size() == 1);
  CHECK(setup.warnings.front().contains(QStringLiteral("no calibration")));
  CHECK(setup.warnings.front().contains(QStringLiteral("prior")));
}

// Regression: Auto planned from the settings alone, with no prompt; on a machine with no cached
// timings the planner timed the models on an empty context and threw, so every reply failed.
TEST_CASE("gui: the Auto tree mode plans a reply with no cached timings", "[gui][model]") {
  specchat::PairOptions o;
  o.target_path = specchat::test::target_model();
  o.draft_path = specchat::test::draft_model();
  const specchat::ModelPair pair = specchat::ModelPair::load(o);
  // A timing cache of its own, empty, so the timings are measured here.
  const QTemporaryDir cache;
  REQUIRE(cache.isValid());
  const QByteArray saved = qgetenv("SPECCHAT_CACHE_DIR");
  qputenv("SPECCHAT_CACHE_DIR", cache.path().toUtf8());
  GenerationSettings s;
  s.auto_tree = true;
  SpecSetup setup;
  CHECK_NOTHROW(setup = plan_spec(s, pair));  // no prompt at all: timed on BOS repeated
  CHECK((setup.tree_mode == QStringLiteral("chain") || setup.tree_mode == QStringLiteral("optimal") ||
         setup.tree_mode == QStringLiteral("none")));
  CHECK_NOTHROW(setup = plan_spec(s, pair, {}, pair.encode_prompt("Once upon a time")));
  qputenv("SPECCHAT_CACHE_DIR", saved);
}

TEST_CASE("gui: drafted tokens are shown distinctly with their step", "[gui][unit]") {
  ChatModel m;
  ChatItem user;
  user.role = QStringLiteral("user");
  user.text = QStringLiteral("hi");
  m.append(user);
  ChatItem reply;
  reply.role = QStringLiteral("assistant");
  reply.streaming = true;
  const int row = m.append(reply);
  ChatView view;
  view.setModel(&m);
  QTextDocument* doc = view.document();

  // Streaming: each token appended at the end with its own format.
  m.appendToken(row, QStringLiteral("Alpha"), true, 0);
  m.appendToken(row, QStringLiteral(" Beta"), true, 0);
  m.appendToken(row, QStringLiteral(" Gamma"), false, 0);
  m.appendToken(row, QStringLiteral(" Delta"), false, 1);
  CHECK(doc->toPlainText().endsWith(QStringLiteral("Alpha Beta Gamma Delta")));
  int pos = 0;
  QTextCharFormat f = format_of(doc, QStringLiteral("Alpha"), &pos);
  CHECK(f.background().color() == view.draftBackground());
  CHECK(f.property(ChatView::StepProperty).toInt() == 0);
  CHECK(view.tokenToolTipAt(pos) == QStringLiteral("step 0 \u00b7 drafted"));
  f = format_of(doc, QStringLiteral("Delta"), &pos);
  CHECK(f.background().style() == Qt::NoBrush);
  CHECK(view.tokenToolTipAt(pos) == QStringLiteral("step 1 \u00b7 target"));
  CHECK(view.draftBackground() != view.palette().color(QPalette::Base));

  // Finished: the same rendering from the stored pieces.
  specchat::MessageStats st;
  st.mode = "speculative";
  st.n_tokens = 4;
  m.finishReply(row, QStringLiteral("Alpha Beta Gamma Delta"), st, QStringLiteral("eos"));
  f = format_of(doc, QStringLiteral("Beta"), &pos);
  CHECK(f.background().color() == view.draftBackground());
  CHECK(view.tokenToolTipAt(pos) == QStringLiteral("step 0 \u00b7 drafted"));

  // Toggle off: no tinted token left; the steps stay in the tooltips.
  QAction* toggle = view.showDraftsAction();
  REQUIRE(toggle->isCheckable());
  toggle->trigger();
  CHECK_FALSE(view.showDrafts());
  f = format_of(doc, QStringLiteral("Beta"), &pos);
  CHECK(f.background().style() == Qt::NoBrush);
  CHECK(view.tokenToolTipAt(pos) == QStringLiteral("step 0 \u00b7 drafted"));
  view.setShowDrafts(true);
  CHECK(toggle->isChecked());
  CHECK(format_of(doc, QStringLiteral("Beta")).background().color() == view.draftBackground());

  // The user message has no token formats.
  CHECK(view.tokenToolTipAt(doc->find(QStringLiteral("hi")).selectionStart()).isEmpty());
}

TEST_CASE("gui: a reloaded reply gets its drafted and target pieces back", "[gui][model]") {
  EngineHost host;
  host.loadModels(target(), draft());
  // The reference: what streamed while generating.
  QList<TokenPiece> streamed;
  QObject ctx;
  QObject::connect(host.worker(), &EngineWorker::tokenGenerated, &ctx,
                   [&](quint64, const QString& t, bool d, int step) { streamed.append(TokenPiece{t, d, step}); });
  const Recorder rec = run_job(host, small_settings());
  REQUIRE(rec.summary.finish != QStringLiteral("error"));
  REQUIRE(rec.summary.stats.n_accepted > 0);  // some drafted tokens to tell apart
  REQUIRE(streamed.size() == static_cast<int>(rec.summary.tokens.size()));

  ChatModel m;
  ChatItem stored;  // as ChatModel::fromMessage builds it: no pieces
  stored.id = 5;
  stored.role = QStringLiteral("assistant");
  stored.text = rec.summary.text;
  stored.token_ids = rec.summary.tokens;
  stored.drafted = rec.summary.drafted;
  stored.tokenizer_hash = rec.summary.tokenizer_hash;
  m.append(stored);
  ChatView view;
  view.setModel(&m);
  PieceRebuilder rebuilder(&m, host.worker());
  REQUIRE(wait_until([&] { return !m.item(0).pieces.isEmpty(); }, kTimeoutMs));
  const QList<TokenPiece>& got = m.item(0).pieces;
  REQUIRE(got.size() == streamed.size());
  for (int i = 0; i < got.size(); ++i) {
    INFO("token " << i);
    CHECK(got[i].text == streamed[i].text);
    CHECK(got[i].drafted == streamed[i].drafted);
    CHECK(got[i].step == streamed[i].step);
  }
  // And the view shows them: some character carries the drafted tint.
  bool tinted = false;
  for (QTextBlock b = view.document()->begin(); b.isValid(); b = b.next()) {
    for (auto f = b.begin(); !f.atEnd(); ++f) {
      if (f.fragment().charFormat().background().color() == view.draftBackground()) tinted = true;
    }
  }
  CHECK(tinted);

  // Leaving the conversation and coming back (the rows are replaced by the stored ones, with no
  // pieces) rebuilds them again.
  m.setItems({stored});
  REQUIRE(m.item(0).pieces.isEmpty());
  REQUIRE(wait_until([&] { return m.item(0).pieces.size() == streamed.size(); }, kTimeoutMs));

  // Another vocabulary: nothing is rebuilt.
  ChatModel other;
  stored.id = 6;
  stored.tokenizer_hash ^= 1;
  other.append(stored);
  QSignalSpy decoded(host.worker(), &EngineWorker::piecesDecoded);
  PieceRebuilder rebuilder2(&other, host.worker());
  REQUIRE(wait_until([&] { return decoded.count() == 1; }, kTimeoutMs));
  QTest::qWait(20);
  CHECK(other.item(0).pieces.isEmpty());
}

TEST_CASE("gui: the live panel shows the selected conversation's last reply, also after a restart", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString db = dir.filePath(QStringLiteral("chat.sqlite"));
  int64_t with_stats = 0, without = 0;
  {
    specchat::ConversationStore s(db.toStdString());
    with_stats = s.create_conversation("measured");
    // Built field by field from std::string values: GCC 12 at -O3 reports a false
    // -Wmaybe-uninitialized inside std::string for `copy, then assign a short literal`.
    specchat::Message u;
    u.conversation_id = with_stats;
    u.role = std::string("user");
    u.text = std::string("hi");
    s.add_message(u);
    specchat::Message a;
    a.conversation_id = with_stats;
    a.role = std::string("assistant");
    a.text = std::string("hello");
    const int64_t reply = s.add_message(a);
    specchat::GenerationRecord g;
    g.mode = "speculative";
    g.params_json = R"({"drafter":"model","tree_mode":"chain","draft_k":4})";
    g.stats_json = R"({"n_generated":37,"n_drafted":40,"n_accepted":30,"n_steps":9,"decode_ms":500,"prefill_ms":20})";
    g.accepted_hist = {1, 0, 2, 6};
    s.record_generation(reply, g);
    without = s.create_conversation("not measured");  // newest: opens first
  }
  specchat::ui::EngineHost engine;
  specchat::ui::ChatController controller(engine.worker(), db);
  specchat::ui::MainWindow window(&controller);
  const specchat::ui::AnalysisTools tools = specchat::ui::install_analysis_tools(window, engine.worker(), &controller);
  REQUIRE(controller.conversationId() == without);
  controller.openConversation(with_stats);
  REQUIRE(wait_until([&] { return tools.live_panel->stats().stats.n_generated == 37; }, 10000));
  CHECK(tools.live_panel->stats().stats.n_accepted == 30);
  CHECK(tools.live_panel->stats().finished);
  CHECK(tools.live_panel->stats().drafter == QStringLiteral("draft model"));
  CHECK(tools.live_panel->stats().stats.accepted_hist == std::vector<int>{1, 0, 2, 6});
  controller.openConversation(without);
  REQUIRE(wait_until([&] { return tools.live_panel->stats().stats.n_generated == 0; }, 10000));
  CHECK(tools.live_panel->updateCount() == 0);  // cleared: "No reply yet"
}
