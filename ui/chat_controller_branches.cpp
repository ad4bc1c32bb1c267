// ChatController's branches (chat_controller.h): edit and resend (a new branch), delete a
// message, and the regenerated alternatives of the last reply ("‹ i/n ›"). Every change goes
// through the storage thread, so the active path in the database is what the view shows and
// what the next context is built from.
#include <QDateTime>

#include "ui/chat_controller.h"

namespace specchat::ui {

void ChatController::requestAlternatives() {
  const int last = model_.rowCount() - 1;
  if (!persistent_ || last < 0 || model_.item(last).role != QLatin1String("assistant")) return;
  const qint64 id = model_.item(last).id;
  if (id > 0) post([id](StorageWorker* w) { w->loadAlternatives(id); });
}

void ChatController::showAlternative(int delta) {
  const int last = model_.rowCount() - 1;
  if (isBusy() || loading_id_ != 0 || last < 0 || alt_ids_.size() < 2 || model_.item(last).id != alt_reply_) return;
  const int at = static_cast<int>(alt_ids_.indexOf(alt_reply_));
  const int to = at + delta;
  if (at < 0 || to < 0 || to >= alt_ids_.size()) return;
  loading_id_ = conversation_id_;  // the switched path arrives as conversationLoaded
  post([from = alt_reply_, target = alt_ids_.at(to)](StorageWorker* w) { w->switchAlternative(from, target); });
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
}

}  // namespace specchat::ui
