// StorageWorker's PIPO latent-format history (storage_worker.h, schema 7 message_latents,
// docs/design/pipo.md): a PIPO reply's pair sequence is stored beside it, and the next PIPO turn
// continues the last one on its path.
#include <exception>

#include "ui/storage_worker.h"

namespace specchat::ui {

void StorageWorker::setMessageLatents(qint64 message_id, const MessageLatents& latents) {
  if (!store_) return;
  try {
    const int64_t id = resolve(message_id);
    if (id <= 0) return;  // the reply itself was not saved: messageSaveFailed already said so
    store_->set_message_latents(id, latents);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not store the PIPO reply's latents: %1").arg(QString::fromUtf8(e.what())));
  }
}

void StorageWorker::resolvePipoHistory(quint64 job_id, const std::vector<PipoHistoryEntry>& entries) {
  PipoHistory h;
  try {
    h = resolve_pipo_history(entries, [this](const PipoHistoryEntry& e) -> std::optional<MessageLatents> {
      const int64_t id = store_ ? resolve(e.id) : 0;
      return id > 0 ? store_->message_latents(id) : std::nullopt;
    });
  } catch (const std::exception& e) {
    // Unreadable latents: the turn re-prefills (PipoHistory says a lossless reply is there).
    h = PipoHistory{};
    h.later_lossless = !entries.empty();
    Q_EMIT failed(tr("Could not read the stored PIPO latents: %1").arg(QString::fromUtf8(e.what())));
  }
  Q_EMIT pipoHistoryResolved(job_id, h);
}

}  // namespace specchat::ui
