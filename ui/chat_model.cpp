#include "ui/chat_model.h"

#include <QPoint>

#include "ui/engine_types.h"

namespace specchat::ui {

QString finish_reason_text(const QString& finish) {
  if (finish == QLatin1String("length")) return ChatModel::tr("cut off: max tokens per reply reached");
  if (finish == QLatin1String("context_full")) return ChatModel::tr("cut off: the context window is full");
  if (finish == QLatin1String("stop")) return ChatModel::tr("ended at a stop string");
  if (finish == QLatin1String("cancelled")) return ChatModel::tr("stopped by you");
  return {};
}

ChatModel::ChatModel(QObject* parent) : QAbstractListModel(parent) {}

int ChatModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(items_.size());
}

QVariant ChatModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= items_.size()) return {};
  const ChatItem& it = items_.at(index.row());
  switch (role) {
    case Qt::DisplayRole:
    case TextRole: return it.text;
    case RoleRole: return it.role;
    case StreamingRole: return it.streaming;
    case TokenCountRole: return it.n_tokens;
    case DraftedCountRole: return it.n_drafted;
    case StatsRole: return it.has_stats ? QVariant::fromValue(it.stats) : QVariant();
    case StatsTextRole: return it.has_stats ? format_stats(it.stats) : QString();
    case FinishRole: return it.finish;
    case MessageIdRole: return it.id;
    case PiecesRole: return QVariant::fromValue(it.pieces);
    case SaveErrorRole: return it.save_error;
    case AlternativesRole: return QPoint(it.alt_index, it.alt_count);
    case NoticeRole: return it.notice;
    default: return {};
  }
}

QHash<int, QByteArray> ChatModel::roleNames() const {
  return {{RoleRole, "role"},
          {TextRole, "text"},
          {StreamingRole, "streaming"},
          {TokenCountRole, "tokenCount"},
          {DraftedCountRole, "draftedCount"},
          {StatsRole, "stats"},
          {StatsTextRole, "statsText"},
          {FinishRole, "finish"},
          {MessageIdRole, "messageId"}, {PiecesRole, "pieces"},
          {SaveErrorRole, "saveError"}, {NoticeRole, "notice"}};
}

void ChatModel::setItems(QList<ChatItem> items) {
  beginResetModel();
  items_ = std::move(items);
  endResetModel();
}

int ChatModel::append(const ChatItem& item) {
  const int row = static_cast<int>(items_.size());
  beginInsertRows(QModelIndex(), row, row);
  items_.append(item);
  endInsertRows();
  return row;
}

void ChatModel::removeAt(int row) {
  if (row < 0 || row >= items_.size()) return;
  beginRemoveRows(QModelIndex(), row, row);
  items_.removeAt(row);
  endRemoveRows();
}

void ChatModel::changed(int row, const QList<int>& roles) {
  const QModelIndex i = index(row);
  Q_EMIT dataChanged(i, i, roles);
}

void ChatModel::appendToken(int row, const QString& text, bool drafted, int step) {
  if (row < 0 || row >= items_.size()) return;
  ChatItem& it = items_[row];
  it.text += text;
  ++it.n_tokens;
  if (drafted) ++it.n_drafted;
  it.pieces.append(TokenPiece{text, drafted, step});
  changed(row, {Qt::DisplayRole, TextRole, TokenCountRole, DraftedCountRole, PiecesRole});
}

void ChatModel::finishReply(int row, const QString& text, const MessageStats& stats,
                            const QString& finish) {
  if (row < 0 || row >= items_.size()) return;
  ChatItem& it = items_[row];
  it.text = text;
  it.streaming = false;
  it.stats = stats;
  it.has_stats = true;
  it.n_tokens = stats.n_tokens;
  it.n_drafted = stats.n_accepted;
  it.finish = finish;
  changed(row, {Qt::DisplayRole, TextRole, StreamingRole, TokenCountRole, DraftedCountRole, StatsRole,
                StatsTextRole, FinishRole});
}

void ChatModel::setAlternatives(int row, int index, int count) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].alt_index = index;
  items_[row].alt_count = count;
  changed(row, {AlternativesRole});
}

void ChatModel::setSaveError(int row, const QString& reason) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].save_error = reason;
  changed(row, {SaveErrorRole});
}

void ChatModel::setNotice(int row, const QString& notice) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].notice = notice;
  changed(row, {NoticeRole});
}

void ChatModel::setPipoLatents(int row, std::vector<int32_t> pairs, std::string release) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].pipo_pairs = std::move(pairs);
  items_[row].pipo_release = std::move(release);
}

void ChatModel::setMessageId(int row, qint64 id) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].id = id;
  changed(row, {MessageIdRole});
}

std::vector<ChatMessage> ChatModel::chatMessages() const {
  std::vector<ChatMessage> out;
  for (ContextMessage& c : contextMessages()) out.push_back(std::move(c.message));
  return out;
}

std::vector<ContextMessage> ChatModel::contextMessages() const {
  std::vector<ContextMessage> out;
  out.reserve(static_cast<size_t>(items_.size()));
  for (const ChatItem& it : items_) {
    if (it.streaming) continue;
    if (it.role == QLatin1String("assistant") && it.text.isEmpty()) continue;
    if (it.role == QLatin1String("error")) continue;  // inline error bubbles are not turns
    ContextMessage c;
    c.message = ChatMessage{it.role.toStdString(), it.text.toStdString()};
    if (it.role == QLatin1String("assistant")) {
      c.ids = it.token_ids;
      c.tokenizer_hash = it.tokenizer_hash;
      c.template_name = it.template_name.toStdString();
    }
    out.push_back(std::move(c));
  }
  return out;
}

void ChatModel::setReplyTokens(int row, std::vector<int32_t> ids, uint64_t tokenizer_hash,
                               const QString& template_name) {
  if (row < 0 || row >= items_.size()) return;
  ChatItem& it = items_[row];
  it.token_ids = std::move(ids);
  it.tokenizer_hash = tokenizer_hash;
  it.template_name = template_name;
}

void ChatModel::setPieces(int row, const QList<TokenPiece>& pieces) {
  if (row < 0 || row >= items_.size()) return;
  items_[row].pieces = pieces;
  changed(row, {PiecesRole});
}

ChatItem ChatModel::fromMessage(const Message& m) {
  ChatItem it;
  it.id = m.id;
  it.role = QString::fromStdString(m.role);
  it.text = QString::fromStdString(m.text);
  it.n_tokens = m.role == "assistant" ? m.stats.n_tokens : 0;
  it.n_drafted = m.stats.n_accepted;
  it.has_stats = m.role == "assistant" && !m.stats.mode.empty();
  it.stats = m.stats;
  it.finish = QString::fromStdString(m.finish);
  if (m.role == "assistant") {
    it.token_ids = m.token_ids;
    it.drafted = m.drafted;
    it.tokenizer_hash = m.tokenizer_hash;
    it.template_name = QString::fromStdString(m.template_name);
  }
  return it;
}

}  // namespace specchat::ui
