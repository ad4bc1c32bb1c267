// specchat: the desktop app. Builds the engine thread, the chat controller (with its SQLite
// store) and the window, and wires them together; no singletons.
#include <QApplication>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QFileInfo>

#include <cstdio>
#include <exception>
#include <optional>

#include "engine/model_pair.h"
#include "storage/conversation_store.h"
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"

namespace {

struct Options {
  QString target;    // empty = bundled target
  QString draft;     // empty = no draft model
  QString database;
  specchat::ui::GenerationSettings settings;
};

// Reads the command line. Model paths are resolved here, not in the worker: without --model the
// bundled target is used with the bundled draft (when present); with --model, a draft only when
// --draft names one. A bad number returns nullopt with the reason in `o_error`.
std::optional<Options> parse(const QApplication& app, QString& o_error) {
  QCommandLineParser p;
  p.setApplicationDescription(QStringLiteral("SpecChat: chat with a local LLM, sped up by lossless speculative decoding."));
  p.addHelpOption();
  p.addVersionOption();
  const QCommandLineOption model({QStringLiteral("m"), QStringLiteral("model")},
                                 QStringLiteral("Target model (GGUF). Default: the bundled model."),
                                 QStringLiteral("path"));
  const QCommandLineOption draft({QStringLiteral("d"), QStringLiteral("draft")},
                                 QStringLiteral("Draft model (GGUF) sharing the target's vocabulary."),
                                 QStringLiteral("path"));
  const QCommandLineOption no_draft(QStringLiteral("no-draft"),
                                    QStringLiteral("Baseline decoding: no draft model."));
  const QCommandLineOption db(QStringLiteral("db"),
                              QStringLiteral("Conversation database. Default: $SPECCHAT_DB or "
                                             "<data dir>/specchat/specchat.sqlite."),
                              QStringLiteral("path"));
  const QCommandLineOption draft_k(QStringLiteral("draft-k"),
                                   QStringLiteral("Drafted tokens per step (0 = baseline). Default 4."),
                                   QStringLiteral("n"), QStringLiteral("4"));
  const QCommandLineOption max_tokens(QStringLiteral("max-tokens"),
                                      QStringLiteral("Most tokens per reply. Default 256."),
                                      QStringLiteral("n"), QStringLiteral("256"));
  const QCommandLineOption temperature({QStringLiteral("t"), QStringLiteral("temperature")},
                                       QStringLiteral("Sampling temperature (0 = greedy). Default 0."),
                                       QStringLiteral("T"), QStringLiteral("0"));
  const QCommandLineOption seed(QStringLiteral("seed"), QStringLiteral("Sampling seed. Default 0."),
                                QStringLiteral("n"), QStringLiteral("0"));
  p.addOptions({model, draft, no_draft, db, draft_k, max_tokens, temperature, seed});
  p.process(app);

  Options o;
  bool ok = false;
  auto bad = [&ok, &o_error](const QCommandLineOption& opt) {
    if (!ok) o_error = QStringLiteral("invalid value for --%1").arg(opt.names().constLast());
    return !ok;
  };
  o.settings.draft_k = p.value(draft_k).toInt(&ok);
  ok = ok && o.settings.draft_k >= 0;
  if (bad(draft_k)) return std::nullopt;
  o.settings.max_tokens = p.value(max_tokens).toInt(&ok);
  ok = ok && o.settings.max_tokens >= 1;
  if (bad(max_tokens)) return std::nullopt;
  o.settings.sampling.temperature = p.value(temperature).toFloat(&ok);
  ok = ok && o.settings.sampling.temperature >= 0;
  if (bad(temperature)) return std::nullopt;
  o.settings.sampling.seed = p.value(seed).toULongLong(&ok);
  if (bad(seed)) return std::nullopt;
  o.target = p.value(model);
  if (p.isSet(no_draft)) {
    o.draft.clear();
  } else if (p.isSet(draft)) {
    o.draft = p.value(draft);
  } else if (o.target.isEmpty()) {
    const QString bundled = QString::fromStdString(specchat::bundled_draft_path());
    if (QFileInfo::exists(bundled)) o.draft = bundled;
  }
  if (p.isSet(db)) {
    o.database = p.value(db);
  } else {
    try {
      o.database = QString::fromStdString(specchat::default_database_path());
    } catch (const std::exception&) {
      o.database.clear();  // the controller reports it; the chat works unsaved
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("SpecChat"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));
  QString error;
  const std::optional<Options> parsed = parse(app, error);
  if (!parsed) {
    std::fprintf(stderr, "specchat: %s (see --help)\n", qPrintable(error));
    return 2;
  }
  const Options& opt = *parsed;

  specchat::ui::EngineHost engine;
  specchat::ui::ChatController controller(engine.worker(), opt.database);
  controller.setSettings(opt.settings);
  specchat::ui::MainWindow window(&controller);
  window.show();
  // Load in the background while the window comes up; the first Send waits for it.
  engine.loadModels(opt.target, opt.draft);
  return app.exec();
}
