#include "ui/conversation_list_model.h"

namespace specchat::ui {

ConversationListModel::ConversationListModel(QObject* parent) : QAbstractListModel(parent) {}

int ConversationListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

QVariant ConversationListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() < 0 || index.row() >= rowCount()) return {};
  const Conversation& c = rows_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
    case Qt::EditRole:
    case TitleRole: return QString::fromStdString(c.title);
    case Qt::ToolTipRole: return QString::fromStdString(c.title);
    case IdRole: return QVariant::fromValue<qint64>(c.id);
    case UpdatedRole: return QVariant::fromValue<qint64>(c.updated_ms);
    default: return {};
  }
}

QHash<int, QByteArray> ConversationListModel::roleNames() const {
  return {{IdRole, "conversationId"}, {TitleRole, "title"}, {UpdatedRole, "updated"}};
}

Qt::ItemFlags ConversationListModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsEditable;
}

bool ConversationListModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || !index.isValid() || index.row() >= rowCount()) return false;
  const QString title = value.toString().simplified();
  if (title.isEmpty()) return false;
  Conversation& c = rows_[static_cast<size_t>(index.row())];
  if (QString::fromStdString(c.title) == title) return false;
  c.title = title.toStdString();  // shown at once; storage confirms with the next listing
  Q_EMIT dataChanged(index, index, {Qt::DisplayRole, TitleRole});
  Q_EMIT renameRequested(c.id, title);
  return true;
}

void ConversationListModel::setConversations(const std::vector<Conversation>& all) {
  all_ = all;
  rebuild();
}

void ConversationListModel::setHidden(qint64 id, bool hidden) {
  if (hidden == hidden_.contains(id)) return;
  if (hidden) {
    hidden_.insert(id);
  } else {
    hidden_.remove(id);
  }
  rebuild();
}

void ConversationListModel::rebuild() {
  beginResetModel();
  rows_.clear();
  for (const Conversation& c : all_) {
    if (!hidden_.contains(c.id)) rows_.push_back(c);
  }
  endResetModel();
}

int ConversationListModel::rowOf(qint64 id) const {
  for (size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

qint64 ConversationListModel::idAt(int row) const {
  return row >= 0 && row < rowCount() ? rows_[static_cast<size_t>(row)].id : 0;
}

QString ConversationListModel::titleAt(int row) const {
  return row >= 0 && row < rowCount() ? QString::fromStdString(rows_[static_cast<size_t>(row)].title) : QString();
}

}  // namespace specchat::ui
