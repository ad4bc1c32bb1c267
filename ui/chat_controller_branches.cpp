// ChatController's branches (chat_controller.h): edit and resend (a new branch), delete a
// message, continue a reply that stopped short (the whole reply becomes a new alternative), and
// the alternatives of any message on the path ("‹ i/n ›", storage/branches.h). Every change goes
// through the storage thread, so the active path in the database is what the view shows and
// what the next context is built from.
#include <QDateTime>

#include "ui/chat_controller.h"

namespace specchat::ui {

void ChatController::requestAlternatives() {
  if (!persistent_ || conversation_id_ == 0 || model_.rowCount() == 0) return;
  post([id = conversation_id_](StorageWorker* w) { w->loadAlternatives(id); });
}

void ChatController::applyAlternatives() {
  for (int row = 0; row < model_.rowCount(); ++row) {
    const ChatItem& it = model_.item(row);
    const QList<qint64> ids = it.id > 0 ? alternatives_.value(it.id) : QList<qint64>();
    const int at = static_cast<int>(ids.indexOf(it.id));
    if (at >= 0 && ids.size() > 1) {
      if (it.alt_index != at || it.alt_count != ids.size()) model_.setAlternatives(row, at, static_cast<int>(ids.size()));
    } else if (it.alt_count != 0) {
      model_.setAlternatives(row, 0, 0);
    }
  }
}

void ChatController::showAlternative(int row, int delta) {
  if (isBusy() || loading_id_ != 0 || row < 0 || row >= model_.rowCount()) return;
  const qint64 id = model_.item(row).id;
  const QList<qint64> ids = id > 0 ? alternatives_.value(id) : QList<qint64>();
  const int at = static_cast<int>(ids.indexOf(id));
  const int to = at + delta;
  if (at < 0 || to < 0 || to >= ids.size() || to == at) return;
  loading_id_ = conversation_id_;  // the switched path arrives as conversationLoaded
  post([from = id, target = ids.at(to)](StorageWorker* w) { w->switchAlternative(from, target); });
}

bool ChatController::canContinue() const {
  const int last = model_.rowCount() - 1;
  if (last < 0) return false;
  const ChatItem& it = model_.item(last);
  return it.role == QLatin1String("assistant") && !it.streaming && !it.text.isEmpty() &&
         (it.finish == QLatin1String("length") || it.finish == QLatin1String("cancelled"));
}

void ChatController::continueReply() {
  if (isBusy() || loading_id_ != 0 || !canContinue()) return;
  if (!remote_url_.isEmpty()) {
    // The OpenAI API has no "continue this reply": a server would answer the cut reply anew.
    setStatus(tr("Continue needs this computer's engine (Settings \u203a Engine): a server cannot resume a reply."), true);
    return;
  }
  clearErrorRow();
  const int last = model_.rowCount() - 1;
  const ChatItem cut = model_.item(last);
  GenerateJob job;
  job.id = ++next_job_id_;
  job.conversation_id = conversation_id_;
  job.context = contextMessages();  // ends with the cut reply and its ids: the engine continues it
  for (const ContextMessage& cm : job.context) job.messages.push_back(cm.message);
  job.settings = request_settings(settings_);
  job_settings_ = job.settings;
  std::vector<PipoHistoryEntry> entries = pipoEntries();  // the cut reply included: PIPO continues its latents
  // The row streams on from the cut text; if nothing comes, the cut reply is shown again.
  replaced_ = cut;
  continued_ = cut;
  model_.removeAt(last);
  ChatItem reply = cut;
  reply.id = 0;
  reply.streaming = true;
  reply.has_stats = false;
  reply.finish.clear();
  reply.alt_index = reply.alt_count = 0;
  reply.save_error.clear();
  reply_row_ = model_.append(reply);
  setBusy(job.id);
  setStats(tr("continuing\u2026"));
  job_pipo_ = job.settings.pipo.enabled && remote_url_.isEmpty();
  if (!engine_error_ || models_loaded_) setStatus(generatingText(), false);
  dispatch(std::move(job), std::move(entries));
}

GenerationSummary ChatController::joinContinued(const ChatItem& prefix, const GenerationSummary& s) {
  GenerationSummary j = s;
  j.text = prefix.text + s.text;
  const bool same_ids = !prefix.token_ids.empty() && prefix.tokenizer_hash == s.tokenizer_hash &&
                        prefix.template_name == s.template_name;
  if (same_ids) {
    j.tokens = prefix.token_ids;
    j.tokens.insert(j.tokens.end(), s.tokens.begin(), s.tokens.end());
    j.drafted = prefix.drafted.size() == prefix.token_ids.size() ? prefix.drafted
                                                                   : std::vector<uint8_t>(prefix.token_ids.size(), 0);
    j.drafted.insert(j.drafted.end(), s.drafted.begin(), s.drafted.end());
  } else {
    j.tokens.clear();
    j.drafted.clear();
  }
  return j;
}

void ChatController::editMessage(int row, const QString& text) {
  const QString body = text.trimmed();
  if (isBusy() || loading_id_ != 0 || body.isEmpty() || row < 0 || row >= model_.rowCount()) return;
  if (model_.item(row).role != QLatin1String("user")) return;
  clearErrorRow();
  const qint64 replaced_id = model_.item(row).id;
  while (model_.rowCount() > row) model_.removeAt(model_.rowCount() - 1);
  ChatItem user;
  user.role = QStringLiteral("user");
  user.text = body;
  const int user_row = model_.append(user);
  Message m;
  m.conversation_id = conversation_id_;
  m.role = "user";
  m.text = body.toStdString();
  m.template_name = template_name_;
  m.created_ms = QDateTime::currentMSecsSinceEpoch();
  save(user_row, m, replaced_id);
  startReply();
}

void ChatController::deleteMessage(int row) {
  if (isBusy() || loading_id_ != 0 || row < 0 || row >= model_.rowCount()) return;
  const qint64 id = model_.item(row).id;
  if (row == error_row_) error_row_ = -1;
  model_.removeAt(row);
  if (error_row_ > row) --error_row_;
  if (id == 0 || read_only_ || !persistent_) return;
  post([id](StorageWorker* w) { w->deleteMessage(id); });
  // The stored path is shown again: where nothing followed the deleted message, another
  // alternative takes its place with its branch (delete_message), and the "‹ i/n ›" around it
  // change.
  loading_id_ = conversation_id_;
  post([c = conversation_id_](StorageWorker* w) { w->loadConversation(c); });
}

}  // namespace specchat::ui
