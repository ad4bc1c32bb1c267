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
    if (id <= 0) throw StorageError("not_found", "the reply was not saved");
    store_->record_generation(id, g);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not record the generation: %1").arg(QString::fromUtf8(e.what())));
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
