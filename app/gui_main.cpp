// specchat: the desktop app. Builds the engine thread, the chat controller (with its SQLite
// store) and the window, and wires them together; no singletons.
#include <QApplication>

#include <cstdlib>
#include <QCommandLineOption>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QSocketNotifier>

#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>

#include <sys/socket.h>
#include <unistd.h>

#include "engine/model_pair.h"
#include "storage/conversation_store.h"
#include "ui/analysis_tools.h"
#include "ui/chat_controller.h"
#include "ui/compare_view.h"
#include "ui/engine_worker.h"
#include "ui/main_window.h"
#include "ui/settings.h"

namespace {

// SIGTERM, SIGINT and SIGHUP quit the app the way closing its window does (the engine thread,
// the app's server and the database close in order; "app server stopped" is logged), instead of
// the default action killing it mid-stream. The handler only writes a byte to a socket pair
// (async-signal-safe); a QSocketNotifier on the other end quits the event loop.
int g_quit_fds[2] = {-1, -1};

extern "C" void on_quit_signal(int) {
  const char c = 1;
  if (g_quit_fds[1] >= 0) (void)!::write(g_quit_fds[1], &c, 1);
}

// Installs the handlers; the notifier lives as long as the application. False when the socket
// pair cannot be made (the default actions then stay).
bool quit_on_signals(QApplication& app) {
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, g_quit_fds) != 0) return false;
  auto* notifier = new QSocketNotifier(g_quit_fds[0], QSocketNotifier::Read, &app);
  QObject::connect(notifier, &QSocketNotifier::activated, &app, [notifier] {
    char c = 0;
    (void)!::read(g_quit_fds[0], &c, 1);
    notifier->setEnabled(false);
    QCoreApplication::quit();
  });
  struct sigaction sa {};
  sa.sa_handler = on_quit_signal;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);
  return true;
}

struct Options {
  specchat::ui::AppSettings app;  // saved settings with the command line's overrides applied
  QString database;
  QString settings_file;          // empty = the platform's default QSettings location
  specchat::BackendKind backend = specchat::BackendKind::cpu;        // target
  specchat::BackendKind draft_backend = specchat::BackendKind::cpu;  // draft
};

// Reads the command line over the saved settings (options given on the command line win for
// this run and are not saved). Model paths are resolved here, not in the worker: without a
// target the bundled target is used with the bundled draft (when present); with a target, a
// draft only when one is named. A bad number returns nullopt with the reason in `o_error`.
std::optional<Options> parse(const QCoreApplication& app, QString& o_error) {
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
                                   QStringLiteral("Drafted tokens per step (0 = baseline). Overrides the saved setting (default 4)."),
                                   QStringLiteral("n"), QStringLiteral("4"));
  const QCommandLineOption max_tokens(QStringLiteral("max-tokens"),
                                      QStringLiteral("Most tokens per reply. Overrides the saved setting (default 256)."),
                                      QStringLiteral("n"), QStringLiteral("256"));
  const QCommandLineOption temperature({QStringLiteral("t"), QStringLiteral("temperature")},
                                       QStringLiteral("Sampling temperature (0 = greedy). Overrides the saved setting (default 0)."),
                                       QStringLiteral("T"), QStringLiteral("0"));
  const QCommandLineOption seed(QStringLiteral("seed"), QStringLiteral("Sampling seed for every reply (pins it). Default: a fresh seed per reply at T > 0."),
                                QStringLiteral("n"), QStringLiteral("0"));
  const QCommandLineOption settings_file(QStringLiteral("settings"),
                                         QStringLiteral("Settings file (INI). Default: the platform's location."),
                                         QStringLiteral("path"));
  const QCommandLineOption backend(QStringLiteral("backend"),
                                   QStringLiteral("Where the target runs: cpu (default) or cuda (a GPU, CUDA builds)."),
                                   QStringLiteral("cpu|cuda"), QStringLiteral("cpu"));
  const QCommandLineOption draft_backend(QStringLiteral("draft-backend"),
                                         QStringLiteral("Where the draft runs: cpu (default) or cuda."),
                                         QStringLiteral("cpu|cuda"), QStringLiteral("cpu"));
  p.addOptions({model, draft, no_draft, db, draft_k, max_tokens, temperature, seed, settings_file, backend,
                draft_backend});
  p.process(app);

  Options o;
  for (const auto& [opt, out] : {std::pair{&backend, &o.backend}, std::pair{&draft_backend, &o.draft_backend}}) {
    const QString v = p.value(*opt);
    if (v != QLatin1String("cpu") && v != QLatin1String("cuda")) {
      o_error = QStringLiteral("invalid value for --%1 (cpu or cuda)").arg(opt->names().constLast());
      return std::nullopt;
    }
    *out = v == QLatin1String("cuda") ? specchat::BackendKind::cuda : specchat::BackendKind::cpu;
  }
  o.settings_file = p.value(settings_file);
  o.app = specchat::ui::load_settings(o.settings_file);
  specchat::ui::GenerationSettings& g = o.app.generation;
  bool ok = false;
  auto bad = [&ok, &o_error](const QCommandLineOption& opt) {
    if (!ok) o_error = QStringLiteral("invalid value for --%1").arg(opt.names().constLast());
    return !ok;
  };
  if (p.isSet(draft_k)) {
    g.draft_k = p.value(draft_k).toInt(&ok);
    ok = ok && g.draft_k >= 0;
    if (bad(draft_k)) return std::nullopt;
  }
  if (p.isSet(max_tokens)) {
    g.max_tokens = p.value(max_tokens).toInt(&ok);
    ok = ok && g.max_tokens >= 1;
    if (bad(max_tokens)) return std::nullopt;
  }
  if (p.isSet(temperature)) {
    g.sampling.temperature = p.value(temperature).toFloat(&ok);
    ok = ok && g.sampling.temperature >= 0;
    if (bad(temperature)) return std::nullopt;
  }
  if (p.isSet(seed)) {
    g.sampling.seed = p.value(seed).toULongLong(&ok);
    g.pin_seed = true;  // a seed named on the command line is used for every reply
    if (bad(seed)) return std::nullopt;
  }
  QString& target = o.app.target_path;
  QString& dpath = o.app.draft_path;
  if (p.isSet(model)) {
    target = p.value(model);
    dpath.clear();  // a draft for another target would not fit
  }
  if (p.isSet(no_draft)) {
    dpath.clear();
  } else if (p.isSet(draft)) {
    dpath = p.value(draft);
  } else {
    dpath = specchat::ui::models_to_load(o.app).draft;
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

// --help and --version only print: they must work without a display (a QApplication aborts when
// no windowing system is reachable), so they are answered under a QCoreApplication.
bool prints_only(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const QLatin1String a(argv[i]);
    if (a == QLatin1String("-h") || a == QLatin1String("--help") || a == QLatin1String("--help-all") ||
        a == QLatin1String("-?") || a == QLatin1String("-v") || a == QLatin1String("--version"))
      return true;
  }
  return false;
}

// Whether Qt can open a window: a platform chosen by -platform or QT_QPA_PLATFORM, or an X11 or
// Wayland display in the environment. Without one QApplication aborts the process (SIGABRT).
bool display_reachable(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (QLatin1String(argv[i]) == QLatin1String("-platform")) return true;
  }
  for (const char* v : {"QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"}) {
    const char* value = std::getenv(v);
    if (value && *value) return true;
  }
  return false;
}

void set_names() {
  QCoreApplication::setApplicationName(QStringLiteral("SpecChat"));
  QCoreApplication::setApplicationVersion(QStringLiteral("0.1.0"));
}

}  // namespace

int main(int argc, char** argv) {
  QString error;
  if (prints_only(argc, argv)) {
    QCoreApplication text_app(argc, argv);
    set_names();
    parse(text_app, error);  // prints and exits; returns only on a bad option value
    std::fprintf(stderr, "specchat: %s (see --help)\n", qPrintable(error));
    return 2;
  }
  if (!display_reachable(argc, argv)) {
    std::fprintf(stderr,
                 "specchat: no display: set DISPLAY (X11) or WAYLAND_DISPLAY, or run with -platform offscreen "
                 "(the command-line front end is specchat-cli)\n");
    return 1;
  }
  QApplication app(argc, argv);
  set_names();
  const std::optional<Options> parsed = parse(app, error);
  if (!parsed) {
    std::fprintf(stderr, "specchat: %s (see --help)\n", qPrintable(error));
    return 2;
  }
  const Options& opt = *parsed;
  quit_on_signals(app);

  specchat::ui::apply_theme(opt.app.theme);
  specchat::ui::EngineHost engine;
  specchat::ui::ChatController controller(engine.worker(), opt.database);
  controller.setSettings(opt.app.generation);
  controller.setRemote(opt.app.engine);
  specchat::ui::MainWindow window(&controller);
  window.setAppSettings(opt.app, opt.settings_file);
  // Live panel, draft-token toggle and Compare… (Ctrl+K) in the View menu.
  const specchat::ui::AnalysisTools tools = specchat::ui::install_analysis_tools(window, engine.worker(), &controller);
  QObject::connect(tools.compare, &specchat::ui::CompareView::saveRequested, &controller,
                   &specchat::ui::ChatController::saveCompareRun);
  window.show();
  // Load in the background while the window comes up; the first Send waits for it.
  engine.worker()->setBackends(opt.backend, opt.draft_backend);
  engine.worker()->setChatTemplate(opt.app.chat_template);
  engine.worker()->setCompute(opt.app.kv_type, opt.app.activations);
  // Settings › Server: queued first, so the load sizes the KV pool for it and then starts it.
  if (opt.app.server.enabled) controller.setServer(opt.app.server);
  engine.loadModels(opt.app.target_path, opt.app.draft_path);
  return app.exec();
}
