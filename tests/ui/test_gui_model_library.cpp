// The model library (issue 12, feature 3): GGUF files in folders with their metadata, the
// bundled draft listed as compatible with the bundled target, a draft with another vocabulary
// not, an unusable file explained; the dialog picks a pair and the window applies it.
#include <catch2/catch.hpp>

#include <QFile>
#include <QDir>
#include <QFileInfo>
#include <QListWidget>
#include <QPushButton>
#include <QTemporaryDir>

#include "engine/gguf.h"
#include "engine/vocab.h"
#include "test_paths.h"
#include "tests/engine/gguf_writer.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/model_library.h"
#include "ui/model_library_dialog.h"

using namespace specchat::ui;

namespace {

const ModelEntry* find(const QList<ModelEntry>& all, const QString& file_name) {
  for (const ModelEntry& e : all)
    if (QFileInfo(e.path).fileName() == file_name) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("gui model library: metadata, compatible drafts by the engine's vocabulary check", "[gui][model]") {
  const QString target = QString::fromStdString(specchat::test::target_model());
  const QString draft = QString::fromStdString(specchat::test::draft_model());
  REQUIRE(QFileInfo::exists(target));
  REQUIRE(QFileInfo::exists(draft));
  QTemporaryDir dir;
  REQUIRE(dir.isValid());
  // A draft whose tokenizer differs (add_bos flipped, as the settings test does) and a junk file.
  const QString other = dir.filePath(QStringLiteral("other-vocab.gguf"));
  const specchat::GgufFile src = specchat::GgufFile::open(draft.toStdString());
  const specchat::Vocab dv = specchat::Vocab::from_gguf(src);
  specchat::test::GgufBuilder::from_file(src).set_bool("tokenizer.ggml.add_bos_token", !dv.add_bos).write_file(other.toStdString());
  {
    QFile junk(dir.filePath(QStringLiteral("sub/junk.gguf")));
    QDir().mkpath(dir.filePath(QStringLiteral("sub")));
    REQUIRE(junk.open(QIODevice::WriteOnly));
    junk.write("not a model");
  }

  const QList<ModelEntry> all = scan_model_folders({QFileInfo(target).absolutePath(), dir.path()});
  const ModelEntry* t = find(all, QFileInfo(target).fileName());
  const ModelEntry* d = find(all, QFileInfo(draft).fileName());
  const ModelEntry* o = find(all, QStringLiteral("other-vocab.gguf"));
  const ModelEntry* j = find(all, QStringLiteral("junk.gguf"));
  REQUIRE(t != nullptr);
  REQUIRE(d != nullptr);
  REQUIRE(o != nullptr);
  REQUIRE(j != nullptr);
  CHECK(t->ok());
  CHECK(t->architecture == QStringLiteral("llama"));
  CHECK(t->n_params > d->n_params);
  CHECK(t->n_vocab > 0);
  CHECK_FALSE(t->weight_types.isEmpty());
  CHECK(t->size_bytes == QFileInfo(target).size());
  CHECK(t->vocab_hash == d->vocab_hash);  // the bundled pair shares one tokenizer
  CHECK_FALSE(j->ok());

  QString why;
  CHECK(is_compatible_draft(*t, *d, &why));
  CHECK_FALSE(is_compatible_draft(*t, *o, &why));
  CHECK(why.contains(QStringLiteral("vocabulary")));
  CHECK_FALSE(is_compatible_draft(*d, *t));  // a larger model is no draft
  const QList<ModelEntry> drafts = compatible_drafts(*t, all);
  REQUIRE(drafts.size() == 1);
  CHECK(drafts.front().path == d->path);

  // The dialog: select the target, its compatible draft is listed first, Use picks the pair.
  ModelLibraryDialog dialog({QFileInfo(target).absolutePath(), dir.path()}, {});
  REQUIRE(dialog.selectModel(target));
  REQUIRE(dialog.drafts().size() == 1);
  auto* list = dialog.findChild<QListWidget*>(QStringLiteral("draftList"));
  REQUIRE(list != nullptr);
  CHECK(list->currentItem()->data(Qt::UserRole).toString() == d->path);
  dialog.findChild<QPushButton*>(QStringLiteral("useModelButton"))->click();
  CHECK(dialog.result() == QDialog::Accepted);
  CHECK(dialog.chosenTarget() == t->path);
  CHECK(dialog.chosenDraft() == d->path);

  // The window applies the pick: saved, recent first, the pair loaded.
  EngineHost engine;
  ChatController controller(engine.worker(), QStringLiteral(":memory:"));
  MainWindow window(&controller);
  window.setAppSettings(AppSettings{}, dir.filePath(QStringLiteral("settings.ini")));
  window.useModels(dialog.chosenTarget(), dialog.chosenDraft(), dialog.folders());
  CHECK(window.appSettings().target_path == t->path);
  CHECK(window.appSettings().draft_path == d->path);
  CHECK(window.appSettings().recent_models.front() == t->path);
  CHECK(window.appSettings().model_folders.contains(dir.path()));
  CHECK(load_settings(dir.filePath(QStringLiteral("settings.ini"))).recent_models.front() == t->path);
}
