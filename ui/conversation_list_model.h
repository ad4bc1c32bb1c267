// The sidebar's conversation list as a Qt list model (GUI thread only, STYLE.md §8): rows come
// from the storage worker's conversationsListed (newest first) and are shown as titles. A
// conversation whose deletion waits for its undo window is hidden without being removed.
#pragma once

#include <QAbstractListModel>
#include <QSet>

#include <vector>

#include "storage/conversation_store.h"

namespace specchat::ui {

class ConversationListModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Roles {
    IdRole = Qt::UserRole + 1,  // qint64 storage id
    TitleRole,                  // QString (also Qt::DisplayRole and Qt::EditRole)
    UpdatedRole,                // qint64 Unix epoch ms
  };
  Q_ENUM(Roles)

  explicit ConversationListModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  // Editing the title (F2 / double-click) emits renameRequested; the row changes when the
  // storage worker lists the renamed conversation.
  bool setData(const QModelIndex& index, const QVariant& value, int role = Qt::EditRole) override;

  // Replaces all rows (model reset), leaving out hidden ids.
  void setConversations(const std::vector<Conversation>& all);
  // Hides / shows a conversation (pending delete and its undo).
  void setHidden(qint64 id, bool hidden);
  int rowOf(qint64 id) const;  // -1 when not listed
  qint64 idAt(int row) const;
  QString titleAt(int row) const;

 Q_SIGNALS:
  void renameRequested(qint64 id, const QString& title);

 private:
  void rebuild();
  std::vector<Conversation> all_;
  std::vector<Conversation> rows_;
  QSet<qint64> hidden_;
};

}  // namespace specchat::ui
