// The app's persistent settings (QSettings): model files, generation options and theme. The
// settings file is injectable so tests never touch the user's real configuration.
#pragma once

#include <QString>
#include <QStringList>

#include "ui/engine_types.h"

class QApplication;

namespace specchat::ui {

struct AppSettings {
  QString target_path;   // empty = bundled target
  QString draft_path;    // empty = no draft model (bundled draft when the target is bundled too)
  GenerationSettings generation;
  QStringList model_folders;   // extra folders the model library scans (File › Models…)
  QStringList recent_models;   // targets picked in the library, most recent first (at most 8)
  QString theme = QStringLiteral("system");  // "system", "light" or "dark"
  // Settings › Engine: where replies come from (the local engine, or an OpenAI-compatible
  // server). The key is kept in the settings file like the rest (as other local chat apps do);
  // leave it empty and start the app with $SPECCHAT_API_KEY to keep it out of the file.
  RemoteEngine engine;
  // The chat template: "" = the one recognised in the model file (ChatML with a notice when the
  // file's is missing or unknown), or a name of chat_template_names() (engine/chat_template.h).
  QString chat_template;
  // How the engine computes (as the CLI's --kv-type and --activations): the KV cache's element
  // type, "f16" (default, half the memory) or "f32"; and quantized matrices (Q8_0, Q4_K, ...) on
  // the CPU with activations rounded to 8 bits, "q8" (default, fastest), or unrounded, "f32".
  QString kv_type = QStringLiteral("f16");
  QString activations = QStringLiteral("q8");
  // Settings › Server: the OpenAI-compatible server over the chat's models (off by default). Its
  // key is kept in the settings file like the remote engine's; empty falls back to
  // $SPECCHAT_API_KEY when the app starts the server on another address than loopback.
  ServerSettings server;
};

// The model pair to load for `s`: the target path as given (empty = the bundled target) and the
// draft path, or, when both paths are empty, the bundled draft if it exists (an empty draft means
// the bundled draft with the bundled target, else none). gui_main and MainWindow::applySettings
// both use it, so clearing the target in Settings never drops the draft.
struct ModelPaths {
  QString target;
  QString draft;
};
ModelPaths models_to_load(const AppSettings& s);

// Reads the settings from `file` (INI format); empty `file` = the platform's default location
// for organization "SpecChat", application "SpecChat". Missing or unreadable values keep the
// defaults of AppSettings; out-of-range numbers are clamped. Never throws.
AppSettings load_settings(const QString& file = QString());
// Writes all of `s` to `file` (same location rules); returns false when it could not be synced.
bool save_settings(const AppSettings& s, const QString& file = QString());

// Applies "system", "light" or "dark" to the whole application (Fusion style with a palette for
// light and dark; the platform's own palette for "system"). Unknown names mean "system".
void apply_theme(const QString& theme);

// "draft model" / "n-gram" / "none" for the drafter choice (none = draft_k 0, baseline).
QString drafter_label(const GenerationSettings& g);

}  // namespace specchat::ui
