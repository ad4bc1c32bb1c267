// GUI tests of the settings: they persist across a restart (an injected INI file, never the
// user's own), the dialog round-trips every field, applying them reaches the controller, and the
// model check explains a missing file, a bad GGUF and a draft whose vocabulary does not match
// the target's instead of letting the engine try to load the pair.
#include <catch2/catch.hpp>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>

#include <string>

#include "engine/gguf.h"
#include "engine/vocab.h"
#include "test_paths.h"
#include "tests/engine/gguf_writer.h"
#include "tests/ui/gui_test_util.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/model_check.h"
#include "ui/settings.h"
#include "ui/settings_dialog.h"

using namespace specchat::ui;

namespace {

AppSettings non_default() {
  AppSettings s;
  s.target_path = QStringLiteral("/models/t.gguf");
  s.draft_path = QStringLiteral("/models/d.gguf");
  GenerationSettings& g = s.generation;
  g.drafter = specchat::DrafterKind::ngram;
  g.tree_mode = specchat::TreeMode::dynamic;
  g.draft_k = 7;
  g.node_budget = 33;
  g.tree_depth = 6;
  g.tree_branch = 3;
  g.sampling.temperature = 0.7f;
  g.sampling.top_k = 40;
  g.sampling.top_p = 0.9f;
  g.sampling.seed = 4242;
  g.pin_seed = true;
  g.max_tokens = 77;
  s.theme = QStringLiteral("dark");
  s.engine.url = QStringLiteral("http://127.0.0.1:8080/v1");
  s.engine.key = QStringLiteral("sk-local");
  s.engine.model = QStringLiteral("specchat");
  s.chat_template = QStringLiteral("llama3");
  s.kv_type = QStringLiteral("f32");
  s.activations = QStringLiteral("f32");
  return s;
}

void check_equal(const AppSettings& a, const AppSettings& b) {
  CHECK(a.target_path == b.target_path);
  CHECK(a.draft_path == b.draft_path);
  CHECK(a.generation.drafter == b.generation.drafter);
  CHECK(a.generation.tree_mode == b.generation.tree_mode);
  CHECK(a.generation.draft_k == b.generation.draft_k);
  CHECK(a.generation.node_budget == b.generation.node_budget);
  CHECK(a.generation.tree_depth == b.generation.tree_depth);
  CHECK(a.generation.tree_branch == b.generation.tree_branch);
  CHECK(a.generation.sampling.temperature == Approx(b.generation.sampling.temperature));
  CHECK(a.generation.sampling.top_k == b.generation.sampling.top_k);
  CHECK(a.generation.sampling.top_p == Approx(b.generation.sampling.top_p));
  CHECK(a.generation.sampling.seed == b.generation.sampling.seed);
  CHECK(a.generation.pin_seed == b.generation.pin_seed);
  CHECK(a.generation.auto_tree == b.generation.auto_tree);
  CHECK(a.generation.max_tokens == b.generation.max_tokens);
  CHECK(a.theme == b.theme);
  CHECK(a.engine.url == b.engine.url);
  CHECK(a.engine.key == b.engine.key);
  CHECK(a.engine.model == b.engine.model);
  CHECK(a.chat_template == b.chat_template);
  CHECK(a.kv_type == b.kv_type);
  CHECK(a.activations == b.activations);
}

}  // namespace

TEST_CASE("gui settings: saved settings load back after a restart", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString file = dir.filePath(QStringLiteral("specchat.ini"));

  // Nothing saved yet: the defaults.
  const AppSettings fresh = load_settings(file);
  check_equal(fresh, AppSettings{});

  REQUIRE(save_settings(non_default(), file));
  check_equal(load_settings(file), non_default());

  // Out-of-range values in the file are clamped, not trusted.
  const QString edited = dir.filePath(QStringLiteral("edited.ini"));
  {
    QFile f(edited);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("[sampling]\nmax_tokens=-5\ntop_p=3\n[drafter]\nnode_budget=100000\n");
  }
  const AppSettings clamped = load_settings(edited);
  CHECK(clamped.generation.max_tokens == 1);
  CHECK(clamped.generation.sampling.top_p == Approx(1.0f));
  CHECK(clamped.generation.node_budget == 1024);
}

TEST_CASE("gui settings: the app's defaults are SpecSettings' (the CLI's)", "[gui][unit]") {
  const GenerationSettings g;
  const specchat::SpecSettings s = to_spec_settings(g);
  const specchat::SpecSettings d;
  CHECK(s.drafter == d.drafter);
  CHECK(s.tree == d.tree);
  CHECK(s.draft_k == d.draft_k);
  CHECK(s.node_budget == d.node_budget);
  CHECK(s.depth == d.depth);
  CHECK(s.branch == d.branch);
  GenerationSettings none = g;
  none.draft_k = 0;  // the dialog's "None": no drafter, whatever kind was chosen before
  CHECK(to_spec_settings(none).drafter == specchat::DrafterChoice::none);
  none.draft_k = 3;
  none.drafter = specchat::DrafterKind::ngram;
  CHECK(to_spec_settings(none).drafter == specchat::DrafterChoice::ngram);
}

TEST_CASE("gui settings: the dialog shows and returns every field", "[gui][unit]") {
  const AppSettings s = non_default();
  SettingsDialog dialog(s);
  CHECK(dialog.findChild<QLineEdit*>(QStringLiteral("targetPathEdit"))->text() == s.target_path);
  CHECK(dialog.findChild<QSpinBox*>(QStringLiteral("nodeBudgetSpin"))->value() == 33);
  check_equal(dialog.settings(), s);

  // "None" as drafter means baseline: draft_k 0.
  auto* drafter = dialog.findChild<QComboBox*>(QStringLiteral("drafterCombo"));
  REQUIRE(drafter != nullptr);
  drafter->setCurrentIndex(drafter->findData(QStringLiteral("none")));
  CHECK(dialog.settings().generation.draft_k == 0);
  dialog.findChild<QSpinBox*>(QStringLiteral("maxTokensSpin"))->setValue(15);
  dialog.findChild<QComboBox*>(QStringLiteral("themeCombo"))->setCurrentIndex(1);
  CHECK(dialog.settings().generation.max_tokens == 15);
  CHECK(dialog.settings().theme == QStringLiteral("light"));
}

TEST_CASE("gui settings: applying saves them and hands them to the controller", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString file = dir.filePath(QStringLiteral("specchat.ini"));
  EngineHost engine;
  engine.loadModels(dir.filePath(QStringLiteral("no-model.gguf")), QString());
  ChatController controller(engine.worker(), dir.filePath(QStringLiteral("chat.sqlite")));
  MainWindow window(&controller);
  AppSettings start;
  start.target_path = dir.filePath(QStringLiteral("no-model.gguf"));
  window.setAppSettings(start, file);
  AppSettings changed = start;  // same model paths: no reload
  changed.generation.max_tokens = 21;
  changed.generation.sampling.temperature = 0.5f;
  changed.theme = QStringLiteral("light");
  window.applySettings(changed);
  CHECK(controller.settings().max_tokens == 21);
  CHECK(controller.settings().sampling.temperature == Approx(0.5f));
  check_equal(load_settings(file), changed);
  apply_theme(QStringLiteral("system"));
}

TEST_CASE("gui settings: a missing or broken model file is explained before loading", "[gui][unit]") {
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  const QString missing = dir.filePath(QStringLiteral("missing.gguf"));
  ModelCheck c = check_model_files(missing, QString());
  CHECK_FALSE(c.ok);
  CHECK(c.error.contains(QStringLiteral("does not exist")));
  CHECK(c.error.contains(missing));

  const QString broken = dir.filePath(QStringLiteral("broken.gguf"));
  {
    QFile f(broken);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("GGUF but not really");
  }
  c = check_model_files(broken, QString());
  CHECK_FALSE(c.ok);
  CHECK(c.error.contains(QStringLiteral("not a valid GGUF")));

  // The dialog stays open and shows the reason.
  AppSettings s;
  s.target_path = broken;
  SettingsDialog dialog(s);
  dialog.accept();
  CHECK(dialog.result() != QDialog::Accepted);
  CHECK(dialog.findChild<QLabel*>(QStringLiteral("modelCheckLabel"))->text().contains(QStringLiteral("not a valid GGUF")));
}

TEST_CASE("gui settings: a draft with another vocabulary is explained, a matching pair accepted", "[gui][model]") {
  const std::string target = specchat::test::target_model();
  const std::string draft = specchat::test::draft_model();
  REQUIRE(QFileInfo::exists(QString::fromStdString(draft)));
  QTemporaryDir dir;
  REQUIRE(dir.isValid());

  // The bundled pair matches.
  ModelCheck ok = check_model_files(QString::fromStdString(target), QString::fromStdString(draft));
  INFO("error: " << ok.error.toStdString());
  CHECK(ok.ok);

  // Same draft with add_bos flipped: the tokenizers no longer agree (as test_cli_faults does).
  const std::string bad = dir.filePath(QStringLiteral("bad-draft.gguf")).toStdString();
  const specchat::GgufFile src = specchat::GgufFile::open(draft);
  const specchat::Vocab dv = specchat::Vocab::from_gguf(src);
  specchat::test::GgufBuilder::from_file(src).set_bool("tokenizer.ggml.add_bos_token", !dv.add_bos).write_file(bad);
  const ModelCheck c = check_model_files(QString::fromStdString(target), QString::fromStdString(bad));
  CHECK_FALSE(c.ok);
  CHECK(c.error.contains(QStringLiteral("vocabularies differ")));

  AppSettings s;
  s.target_path = QString::fromStdString(target);
  s.draft_path = QString::fromStdString(bad);
  SettingsDialog dialog(s);
  dialog.accept();
  CHECK(dialog.result() != QDialog::Accepted);
  CHECK(dialog.findChild<QLabel*>(QStringLiteral("modelCheckLabel"))->text().contains(QStringLiteral("vocabularies differ")));

  // Fixing the path lets the dialog close.
  dialog.findChild<QLineEdit*>(QStringLiteral("draftPathEdit"))->setText(QString::fromStdString(draft));
  dialog.accept();
  CHECK(dialog.result() == QDialog::Accepted);
}

TEST_CASE("gui settings: only the fields the drafter, tree mode and temperature use are enabled, Auto round trips", "[gui][unit]") {
  AppSettings s;
  s.generation.sampling.temperature = 0;
  SettingsDialog dialog(s);
  auto* drafter = dialog.findChild<QComboBox*>(QStringLiteral("drafterCombo"));
  auto* tree = dialog.findChild<QComboBox*>(QStringLiteral("treeModeCombo"));
  auto enabled = [&](const char* name) { return dialog.findChild<QWidget*>(QString::fromLatin1(name))->isEnabled(); };
  REQUIRE(drafter != nullptr);
  REQUIRE(tree != nullptr);
  drafter->setCurrentIndex(drafter->findData(QStringLiteral("model")));
  tree->setCurrentIndex(tree->findData(QStringLiteral("chain")));
  CHECK(enabled("draftKSpin"));
  CHECK_FALSE(enabled("nodeBudgetSpin"));
  CHECK_FALSE(enabled("branchSpin"));
  tree->setCurrentIndex(tree->findData(QStringLiteral("dynamic")));
  CHECK_FALSE(enabled("draftKSpin"));
  CHECK(enabled("nodeBudgetSpin"));
  CHECK(enabled("depthSpin"));
  CHECK(enabled("branchSpin"));
  tree->setCurrentIndex(tree->findData(QStringLiteral("optimal")));
  CHECK(enabled("depthSpin"));
  CHECK_FALSE(enabled("branchSpin"));
  tree->setCurrentIndex(tree->findData(QStringLiteral("auto")));
  for (const char* n : {"draftKSpin", "nodeBudgetSpin", "depthSpin", "branchSpin"}) CHECK_FALSE(enabled(n));
  CHECK(dialog.settings().generation.auto_tree);
  drafter->setCurrentIndex(drafter->findData(QStringLiteral("none")));
  CHECK_FALSE(enabled("treeModeCombo"));
  // Greedy: sampling filters and the seed do nothing.
  CHECK_FALSE(enabled("topKSpin"));
  CHECK_FALSE(enabled("seedSpin"));
  dialog.findChild<QDoubleSpinBox*>(QStringLiteral("temperatureSpin"))->setValue(0.8);
  CHECK(enabled("topKSpin"));
  CHECK(enabled("pinSeedCheck"));
  CHECK_FALSE(enabled("seedSpin"));  // unpinned: a fresh seed per reply
  dialog.findChild<QCheckBox*>(QStringLiteral("pinSeedCheck"))->setChecked(true);
  CHECK(enabled("seedSpin"));
  // Hover help, one line each, for the terms people do not know.
  for (const char* n : {"nodeBudgetSpin", "depthSpin", "treeModeCombo", "draftKSpin"}) {
    INFO(n);
    const QString tip = dialog.findChild<QWidget*>(QString::fromLatin1(n))->toolTip();
    CHECK_FALSE(tip.isEmpty());
    CHECK_FALSE(tip.contains(QLatin1Char('\n')));
  }

  // "auto" is saved and read back as in the CLI's --tree auto.
  QTemporaryDir dir;
  const QString file = dir.filePath(QStringLiteral("s.ini"));
  AppSettings a;
  a.generation.auto_tree = true;
  REQUIRE(save_settings(a, file));
  CHECK(load_settings(file).generation.auto_tree);
  CHECK(to_spec_settings(load_settings(file).generation).auto_tree);
}

TEST_CASE("gui settings: the dialog keeps the model library's folders and recents, a bad server URL is explained", "[gui][unit]") {
  // Regression: accepting Settings dropped the library's folders and recent models (the dialog
  // built its result from defaults).
  AppSettings s = non_default();
  s.model_folders = {QStringLiteral("/models"), QStringLiteral("/more")};
  s.recent_models = {QStringLiteral("/models/t.gguf")};
  SettingsDialog dialog(s);
  CHECK(dialog.settings().model_folders == s.model_folders);
  CHECK(dialog.settings().recent_models == s.recent_models);
  CHECK(dialog.findChild<QLineEdit*>(QStringLiteral("remoteUrlEdit"))->text() == s.engine.url);
  CHECK(dialog.findChild<QLineEdit*>(QStringLiteral("remoteKeyEdit"))->echoMode() == QLineEdit::Password);

  AppSettings local = AppSettings{};
  local.engine.url = QStringLiteral("ftp://example");  // not http(s)
  SettingsDialog bad(local);
  bad.accept();
  CHECK(bad.result() != QDialog::Accepted);
  CHECK(bad.findChild<QLabel*>(QStringLiteral("modelCheckLabel"))->text().contains(QStringLiteral("Server URL")));
  bad.findChild<QLineEdit*>(QStringLiteral("remoteUrlEdit"))->clear();  // back to the local engine
  bad.accept();
  CHECK(bad.result() == QDialog::Accepted);
}

TEST_CASE("gui settings: the chat template picked in Settings is the one the engine renders with", "[gui][model]") {
  // Issue 11: an unknown template falls back to one the user picks. The bundled target's own
  // template is recognised ("specchat"); picking ChatML makes the loaded pair use ChatML, and
  // "From the model file" goes back to the file's.
  AppSettings s;
  s.chat_template = QStringLiteral("chatml");
  SettingsDialog dialog(s);
  auto* combo = dialog.findChild<QComboBox*>(QStringLiteral("chatTemplateCombo"));
  REQUIRE(combo);
  CHECK(combo->currentData().toString() == QStringLiteral("chatml"));
  CHECK(dialog.settings().chat_template == QStringLiteral("chatml"));

  EngineHost engine;
  QString loaded_template;
  QObject::connect(engine.worker(), &EngineWorker::modelsLoaded, &dialog,  // queued to this thread
                   [&](const ModelInfo& info) { loaded_template = info.template_name; });
  engine.worker()->setChatTemplate(QStringLiteral("chatml"));
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(specchat::test::wait_until([&] { return !loaded_template.isEmpty(); }, 60000));
  CHECK(loaded_template == QStringLiteral("chatml"));
  loaded_template.clear();
  engine.worker()->setChatTemplate(QString());
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(specchat::test::wait_until([&] { return !loaded_template.isEmpty(); }, 60000));
  CHECK(loaded_template == QStringLiteral("specchat"));

  // A name the settings file holds but no template has is not kept.
  QTemporaryDir dir;
  const QString file = dir.filePath(QStringLiteral("s.ini"));
  {
    QFile f(file);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("[models]\nchat_template=nonsense\n");
  }
  CHECK(load_settings(file).chat_template.isEmpty());
}

TEST_CASE("gui settings: the KV type and activation rounding picked in Settings are the ones the engine loads with",
          "[gui][model]") {
  // Issue 11: the app had no way to choose them (it always ran an f16 KV cache and 8-bit
  // activations). Defaults are the CLI's.
  CHECK(AppSettings{}.kv_type == QStringLiteral("f16"));
  CHECK(AppSettings{}.activations == QStringLiteral("q8"));
  AppSettings s;
  s.kv_type = QStringLiteral("f32");
  s.activations = QStringLiteral("f32");
  SettingsDialog dialog(s);
  auto* kv = dialog.findChild<QComboBox*>(QStringLiteral("kvTypeCombo"));
  auto* act = dialog.findChild<QComboBox*>(QStringLiteral("activationsCombo"));
  REQUIRE(kv);
  REQUIRE(act);
  CHECK(kv->currentData().toString() == QStringLiteral("f32"));
  CHECK(act->currentData().toString() == QStringLiteral("f32"));
  kv->setCurrentIndex(kv->findData(QStringLiteral("f16")));
  CHECK(dialog.settings().kv_type == QStringLiteral("f16"));
  CHECK(dialog.settings().activations == QStringLiteral("f32"));

  EngineHost engine;
  ModelInfo loaded;
  QObject::connect(engine.worker(), &EngineWorker::modelsLoaded, &dialog,  // queued to this thread
                   [&](const ModelInfo& info) { loaded = info; });
  engine.worker()->setCompute(QStringLiteral("f32"), QStringLiteral("f32"));
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(specchat::test::wait_until([&] { return !loaded.kv_type.isEmpty(); }, 60000));
  CHECK(loaded.kv_type == QStringLiteral("f32"));
  CHECK_FALSE(loaded.q8_activations);  // an F16 target never rounds
  loaded = ModelInfo{};
  engine.worker()->setCompute(QStringLiteral("f16"), QStringLiteral("q8"));
  engine.loadModels(QString::fromStdString(specchat::test::target_model()), QString());
  REQUIRE(specchat::test::wait_until([&] { return !loaded.kv_type.isEmpty(); }, 60000));
  CHECK(loaded.kv_type == QStringLiteral("f16"));

  // Values the settings file holds but the engine has not are not kept.
  QTemporaryDir dir;
  const QString file = dir.filePath(QStringLiteral("s.ini"));
  {
    QFile f(file);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("[models]\nkv_type=f8\nactivations=int4\n");
  }
  CHECK(load_settings(file).kv_type == QStringLiteral("f16"));
  CHECK(load_settings(file).activations == QStringLiteral("q8"));
}
