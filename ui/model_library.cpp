#include "ui/model_library.h"

#include <unistd.h>

#include <QDirIterator>
#include <QFileInfo>
#include <QMap>
#include <QSet>

#include <algorithm>
#include <exception>

#include "engine/chat_template.h"
#include "engine/gguf.h"
#include "engine/vocab.h"

namespace specchat::ui {

namespace {

// The vocabulary of a readable entry (re-read: entries are plain values).
Vocab vocab_of(const QString& path) { return Vocab::from_gguf(GgufFile::open(path.toStdString())); }

}  // namespace

ModelEntry read_model_entry(const QString& path) {
  ModelEntry e;
  const QFileInfo fi(path);
  e.path = fi.absoluteFilePath();
  e.size_bytes = fi.size();
  e.name = fi.fileName();
  try {
    const GgufFile f = GgufFile::open(e.path.toStdString());
    e.architecture = QString::fromStdString(f.get_string_or("general.architecture", ""));
    const std::string name = f.get_string_or("general.name", "");
    if (!name.empty()) e.name = QString::fromStdString(name);
    if (!e.architecture.isEmpty()) {
      e.n_ctx_train = static_cast<int>(f.get_u32_or(e.architecture.toStdString() + ".context_length", 0));
    }
    QMap<QString, qint64> by_type;
    for (const GgufTensorInfo& t : f.tensors()) {
      const auto n = static_cast<qint64>(t.n_elements());
      e.n_params += n;
      by_type[QString::fromUtf8(ggml_type_name(t.type))] += n;
    }
    QList<QPair<qint64, QString>> types;
    for (auto it = by_type.cbegin(); it != by_type.cend(); ++it) types.append({it.value(), it.key()});
    std::sort(types.begin(), types.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (const auto& t : types) e.weight_types << t.second;
    e.has_chat_template = f.has("tokenizer.chat_template");
    e.chat_template_name = QString::fromStdString(chat_template_name_for(f.get_string_or("tokenizer.chat_template", "")));
    const Vocab v = Vocab::from_gguf(f);
    e.n_vocab = static_cast<int>(v.size());
    e.vocab_hash = v.hash();
  } catch (const std::exception& ex) {
    e.error = QString::fromStdString(ex.what());
    e.error.replace(e.path + QStringLiteral(": "), QString());
  }
  return e;
}

QList<ModelEntry> scan_model_folders(const QStringList& folders) {
  QSet<QString> seen;
  QStringList files;
  for (const QString& folder : folders) {
    if (folder.isEmpty()) continue;
    QDirIterator it(folder, {QStringLiteral("*.gguf")}, QDir::Files | QDir::Readable, QDirIterator::Subdirectories);
    const int base_depth = static_cast<int>(QDir(folder).absolutePath().count(QLatin1Char('/')));
    while (it.hasNext()) {
      const QString p = QFileInfo(it.next()).absoluteFilePath();
      if (p.count(QLatin1Char('/')) - base_depth > 3) continue;  // two subfolder levels at most
      if (!seen.contains(p)) {
        seen.insert(p);
        files << p;
      }
    }
  }
  files.sort();
  QList<ModelEntry> out;
  for (const QString& p : files) out.append(read_model_entry(p));
  return out;
}

bool is_compatible_draft(const ModelEntry& target, const ModelEntry& draft, QString* why) {
  auto no = [why](const QString& reason) {
    if (why) *why = reason;
    return false;
  };
  if (!target.ok() || !draft.ok()) return no(QObject::tr("unreadable file"));
  if (target.path == draft.path) return no(QObject::tr("the target itself"));
  if (draft.n_params >= target.n_params) return no(QObject::tr("not smaller than the target"));
  try {
    const VocabCheck c = check_draft_vocab(vocab_of(target.path), vocab_of(draft.path));
    if (!c.ok) return no(QObject::tr("another vocabulary: %1").arg(QString::fromStdString(c.error)));
  } catch (const std::exception& ex) {
    return no(QString::fromStdString(ex.what()));
  }
  if (why) why->clear();
  return true;
}

QList<ModelEntry> compatible_drafts(const ModelEntry& target, const QList<ModelEntry>& all) {
  QList<ModelEntry> out;
  for (const ModelEntry& d : all) {
    // Equal hashes are the common case; the full check runs only for those and near misses
    // (same size of vocabulary), as the engine's check accepts small documented differences.
    if (d.ok() && (d.vocab_hash == target.vocab_hash || d.n_vocab == target.n_vocab) && is_compatible_draft(target, d)) {
      out.append(d);
    }
  }
  std::sort(out.begin(), out.end(), [](const ModelEntry& a, const ModelEntry& b) { return a.n_params < b.n_params; });
  return out;
}

qint64 physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<qint64>(pages) * page : 0;
}

bool fits_in_memory(qint64 size_bytes, qint64 memory_bytes) {
  return memory_bytes > 0 && static_cast<double>(size_bytes) * 1.2 < static_cast<double>(memory_bytes);
}

QString format_params(qint64 n) {
  if (n >= 1000000000) return QStringLiteral("%1 B").arg(static_cast<double>(n) / 1e9, 0, 'f', 1);
  if (n >= 1000000) return QStringLiteral("%1 M").arg(static_cast<double>(n) / 1e6, 0, 'f', 0);
  if (n >= 1000) return QStringLiteral("%1 K").arg(static_cast<double>(n) / 1e3, 0, 'f', 0);
  return QString::number(n);
}

}  // namespace specchat::ui
