#include "ui/model_check.h"

#include <QFileInfo>
#include <QObject>

#include <exception>
#include <new>

#include "engine/gguf.h"
#include "engine/model_pair.h"
#include "engine/vocab.h"

namespace specchat::ui {

namespace {

// The exception's text without the "<path>: " prefix the engine's loaders put in front: the
// message around it names the file once already.
QString reason(const std::exception& e, const QString& path) {
  QString m = QString::fromStdString(e.what());
  m.replace(path + QStringLiteral(": "), QString());
  return m;
}

// The vocabulary of `path`; sets `error` (naming `which` file) and returns false on failure.
bool read_vocab(const QString& path, const QString& which, Vocab* out, QString* error) {
  if (!QFileInfo::exists(path)) {
    *error = QObject::tr("The %1 model file does not exist: %2").arg(which, path);
    return false;
  }
  try {
    const GgufFile f = GgufFile::open(path.toStdString());
    *out = Vocab::from_gguf(f);
    return true;
  } catch (const GgufError& e) {
    *error = QObject::tr("The %1 model is not a valid GGUF file (%2): %3").arg(which, path, reason(e, path));
  } catch (const VocabError& e) {
    *error = QObject::tr("The %1 model has no usable vocabulary (%2): %3").arg(which, path, reason(e, path));
  } catch (const std::bad_alloc&) {
    *error = QObject::tr("Out of memory while reading the %1 model %2.").arg(which, path);
  } catch (const std::exception& e) {
    *error = QObject::tr("Could not read the %1 model %2: %3").arg(which, path, reason(e, path));
  }
  return false;
}

}  // namespace

ModelCheck check_model_files(const QString& target, const QString& draft) {
  ModelCheck r;
  const QString tpath = target.isEmpty() ? QString::fromStdString(bundled_target_path()) : target;
  Vocab tv, dv;
  if (!read_vocab(tpath, QObject::tr("target"), &tv, &r.error)) {
    r.ok = false;
    return r;
  }
  if (draft.isEmpty()) return r;
  if (!read_vocab(draft, QObject::tr("draft"), &dv, &r.error)) {
    r.ok = false;
    return r;
  }
  const VocabCheck vc = check_draft_vocab(tv, dv);
  for (const std::string& w : vc.warnings) r.warnings << QString::fromStdString(w);
  if (!vc.ok) {
    r.ok = false;
    // Speculative decoding is lossless only when both models speak the same token ids: the
    // target verifies the draft's ids one for one.
    r.error = QObject::tr("The draft model cannot be used with this target: their vocabularies differ "
                          "(%1). Speculative decoding needs the same tokenizer in both models; pick a "
                          "draft from the same model family, or choose the n-gram drafter or none.")
                  .arg(QString::fromStdString(vc.error));
  }
  return r;
}

}  // namespace specchat::ui
