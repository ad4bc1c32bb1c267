// StorageWorker's records about generation (generations, models and compare_runs tables); the
// conversation and message slots are in storage_worker.cpp.
#include <QFileInfo>

#include <exception>

#include "ui/storage_worker.h"

namespace specchat::ui {

void StorageWorker::recordGeneration(qint64 message_id, const GenerationRecord& g) {
  if (!store_) return;
  try {
    const int64_t id = resolve(message_id);
    if (id <= 0) return;  // the reply itself was not saved: messageSaveFailed already said so
    store_->record_generation(id, g);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not record the generation: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::loadLastGeneration(qint64 id) {
  if (!store_) return;
  try {
    const int64_t real = resolve(id);
    if (real > 0) {
      const std::vector<Message> path = store_->messages(real);
      for (auto it = path.rbegin(); it != path.rend(); ++it) {
        if (it->role != "assistant") continue;
        const std::vector<GenerationRecord> g = store_->generations(it->id);
        if (!g.empty()) {
          Q_EMIT lastGeneration(id, true, g.back());
          return;
        }
        break;  // the last reply has no record (imported, or stored before records)
      }
    }
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not read the last reply's statistics: %1").arg(QString::fromUtf8(e.what())));
  }
  Q_EMIT lastGeneration(id, false, GenerationRecord{});
}

void StorageWorker::loadAlternatives(qint64 conversation_id) {
  if (!store_) return;
  try {
    const int64_t real = resolve(conversation_id);
    if (real <= 0) return;
    QHash<qint64, QList<qint64>> out;
    for (const auto& [id, alternatives] : store_->path_alternatives(real)) {
      QList<qint64>& ids = out[id];
      for (int64_t a : alternatives) ids << a;
    }
    Q_EMIT alternativesLoaded(conversation_id, out);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not list the other versions of messages: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::switchAlternative(qint64 from_id, qint64 to_id) {
  if (!store_) return;
  try {
    const int64_t from = resolve(from_id);
    const int64_t to = resolve(to_id);
    const std::vector<Message> alts = store_->alternatives(from);
    if (alts.empty()) throw StorageError("not_found", "the message no longer exists");
    store_->switch_alternative(from, to);
    const std::optional<Conversation> c = store_->conversation(alts.front().conversation_id);
    if (c) Q_EMIT conversationLoaded(*c, store_->messages(c->id));
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not switch to the other version: %1").arg(QString::fromUtf8(e.what())));
    // The view waits for the path: send the stored one, unchanged.
    try {
      const int64_t from = resolve(from_id);
      const std::vector<Message> alts = from > 0 ? store_->alternatives(from) : std::vector<Message>{};
      if (!alts.empty()) loadConversation(alts.front().conversation_id);
    } catch (const std::exception&) {
      // nothing more to report than the failure above
    }
  }
}

void StorageWorker::recordModel(const QString& path, const QString& architecture) {
  if (!store_ || path.isEmpty()) return;
  try {
    const QFileInfo fi(path);
    const std::string p = fi.absoluteFilePath().toStdString();
    const auto known = store_->model_by_path(p);
    if (known && known->size_bytes == fi.size() && !known->sha256.empty()) return;
    ModelRecord m;
    m.path = p;
    m.size_bytes = fi.size();
    m.sha256 = sha256_file(p);
    m.architecture = architecture.toStdString();
    store_->upsert_model(m);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not record the model file: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::saveCompareRun(const CompareRecord& r) {
  if (!store_) {
    Q_EMIT failed(tr("Could not save the comparison: no database."));
    return;
  }
  try {
    CompareRecord copy = r;
    if (copy.conversation_id) {
      const int64_t id = resolve(*copy.conversation_id);
      if (id > 0) copy.conversation_id = id;
      else copy.conversation_id.reset();
    }
    Q_EMIT compareSaved(store_->save_compare_run(copy));
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not save the comparison: %1").arg(QString::fromUtf8(e.what())));
  }
}

}  // namespace specchat::ui
