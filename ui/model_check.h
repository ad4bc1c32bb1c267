// Checks a target/draft pair of GGUF files before loading them: the files open as GGUF, each has
// a vocabulary, and the draft's vocabulary can serve the target (check_draft_vocab, the same
// rule ModelPair::load applies). Reads metadata only (the files are memory-mapped, no weights
// are touched), so the settings dialog can explain a problem before a long load fails.
#pragma once

#include <QString>
#include <QStringList>

namespace specchat::ui {

struct ModelCheck {
  bool ok = true;
  QString error;         // why the pair cannot be loaded (names the file and the reason)
  QStringList warnings;  // accepted vocabulary differences
};

// `target` empty = the bundled target; `draft` empty = no draft (only the target is checked).
// Never throws.
ModelCheck check_model_files(const QString& target, const QString& draft);

}  // namespace specchat::ui
