// The app's persistent settings (QSettings): model files, generation options and theme. The
// settings file is injectable so tests never touch the user's real configuration.
#pragma once

#include <QString>

#include "ui/engine_types.h"

class QApplication;

namespace specchat::ui {

struct AppSettings {
  QString target_path;   // empty = bundled target
  QString draft_path;    // empty = no draft model (bundled draft when the target is bundled too)
  GenerationSettings generation;
  QString theme = QStringLiteral("system");  // "system", "light" or "dark"
};

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
