// ChatController and PIPO (chat_controller.h, docs/design/pipo.md): a PIPO job gets the latent
// history it continues from the storage thread before it goes to the engine, a finished PIPO
// reply's pair sequence is stored beside it (set_message_latents), mode switches are said in
// the chat, and the status line says which PIPO parts loaded. PIPO is approximate: its replies
// carry MessageStats mode "pipo", which the chat shows as "approximate: not verified by the
// target".
#include "ui/chat_controller.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

void ChatController::setSettings(const GenerationSettings& s) {
  const bool pipo_changed = s.pipo != settings_.pipo;
  settings_ = s;
  if (!pipo_changed) return;
  EngineWorker* w = worker_;
  QMetaObject::invokeMethod(w, [w, c = s.pipo] { w->setPipo(c); }, Qt::QueuedConnection);
}

std::vector<PipoHistoryEntry> ChatController::pipoEntries() const {
  std::vector<PipoHistoryEntry> out;
  for (const ChatItem& it : model_.items()) {
    // The rows ChatModel::contextMessages keeps as replies.
    if (it.streaming || it.role != QLatin1String("assistant") || it.text.isEmpty()) continue;
    PipoHistoryEntry e;
    e.id = it.id;
    e.has_latents = !it.pipo_pairs.empty();
    e.pairs = it.pipo_pairs;
    e.release = it.pipo_release;
    out.push_back(std::move(e));
  }
  return out;
}

void ChatController::dispatch(GenerateJob job, std::vector<PipoHistoryEntry> entries) {
  const bool pipo = job.settings.pipo.enabled && remote_url_.isEmpty();
  reply_notice_.clear();
  if (!pipo) {
    const bool wanted = job.settings.pipo.enabled;
    job.settings.pipo.enabled = false;  // a server's reply is never labelled PIPO
    // Switching back from PIPO is explicit too: the target prefills what PIPO wrote.
    bool after_pipo = false;
    for (const ChatItem& it : model_.items()) {
      if (it.streaming || it.role != QLatin1String("assistant") || it.text.isEmpty()) continue;
      after_pipo = it.has_stats && it.stats.mode == kPipoMode;
    }
    if (wanted) {
      // PIPO is on, but the reply comes from a server: say it is not a PIPO reply.
      reply_notice_ = tr("PIPO runs on this computer's engine: this reply came from the server %1, not PIPO.")
                          .arg(remote_url_);
    } else if (after_pipo && remote_url_.isEmpty()) {
      reply_notice_ = tr("Lossless mode after PIPO replies: the target re-prefills the conversation (the PIPO "
                         "replies above were not verified by it).");
    }
    Q_EMIT generateRequested(job);
    return;
  }
  const quint64 id = job.id;
  pipo_waiting_[id] = std::move(job);
  post([id, e = std::move(entries)](StorageWorker* w) { w->resolvePipoHistory(id, e); });
}

void ChatController::onPipoHistory(quint64 job_id, const PipoHistory& h) {
  const auto it = pipo_waiting_.find(job_id);
  if (it == pipo_waiting_.end()) return;
  GenerateJob job = std::move(it->second);
  pipo_waiting_.erase(it);
  if (abandoned_.job == job_id) {
    abandoned_ = Abandoned{};  // left before it started: nothing was generated, nothing to save
    return;
  }
  if (job_id != current_job_) return;
  // Stopped meanwhile: the engine still answers it (finish "cancelled"), as for any stopped job.
  job.pipo_history = h;
  Q_EMIT generateRequested(job);
}

void ChatController::onPipoNote(quint64 job_id, const QString& note) {
  if (job_id != current_job_ || note.isEmpty()) return;
  setStatus(note, false);  // said again under the reply when it is done (finishPipo)
}

void ChatController::onPipoStatus(const PipoStatus& st) {
  pipo_status_ = st;
  Q_EMIT pipoStatusChanged(st);
  updateReadyText();
}

void ChatController::updateReadyText() {
  if (models_ready_text_.isEmpty()) return;  // the models' load will compose it
  const bool showing_ready = !ready_text_.isEmpty() && status_text_ == ready_text_;
  const QString pipo = format_pipo_status(pipo_status_);
  ready_text_ = pipo.isEmpty() ? models_ready_text_ : models_ready_text_ + QStringLiteral(" \u00b7 ") + pipo;
  if (showing_ready && !isBusy()) setStatus(ready_text_, storage_notice_is_error_);
}

void ChatController::postLatents(qint64 pending, const GenerationSummary& s) {
  if (!s.pipo || pending == 0 || s.pipo_pairs.empty() || s.pipo_live.release.isEmpty()) return;
  const MessageLatents l{s.pipo_live.release.toStdString(), s.pipo_pairs};
  post([pending, l](StorageWorker* w) { w->setMessageLatents(pending, l); });
}

void ChatController::finishPipo(int row, qint64 pending, const GenerationSummary& s) {
  const QString notice = s.pipo ? s.pipo_note : reply_notice_;
  reply_notice_.clear();
  if (!notice.isEmpty()) model_.setNotice(row, notice);
  if (!s.pipo) return;
  // Kept in memory too: the next turn continues them even when they could not be stored.
  model_.setPipoLatents(row, s.pipo_pairs, s.pipo_live.release.toStdString());
  postLatents(pending, s);
}

}  // namespace specchat::ui
