// The messages of the open conversation as a Qt list model (GUI thread only). Views read it
// through the roles below; the controller streams tokens into the last assistant message.
#pragma once

#include <QAbstractListModel>
#include <QList>
#include <QString>

#include <vector>

#include "engine/chat_context.h"
#include "engine/chat_template.h"
#include "storage/conversation_store.h"

namespace specchat::ui {

// One emitted token of a reply, for the draft visualization: its text (may be empty when it
// completes no UTF-8 yet), whether it came from an accepted draft (false = sampled by the
// target itself) and the target verification step that emitted it (from 0).
struct TokenPiece {
  QString text;
  bool drafted = false;
  int step = 0;
};

// One row. User messages have no stats; an assistant message has them once it is finished.
struct ChatItem {
  qint64 id = 0;            // storage id; 0 = not stored
  QString role;             // "system", "user" or "assistant"
  QString text;
  bool streaming = false;   // reply still being generated
  int n_tokens = 0;         // tokens so far (live while streaming)
  int n_drafted = 0;        // of which accepted draft tokens
  bool has_stats = false;
  MessageStats stats;       // valid when has_stats
  QString finish;           // finish reason of a reply ("eos", "length", "cancelled", ...)
  QString save_error;       // why this message could not be stored; empty = saved or pending
  // Alternatives of this message (ConversationStore::path_alternatives: regenerated or continued
  // replies, versions of an edited message): shown as
  // "‹ alt_index+1/alt_count ›" when alt_count > 1.
  int alt_index = 0;
  int alt_count = 0;
  QList<TokenPiece> pieces; // [n_tokens] streamed tokens; empty when not known (e.g. reloaded)
  // A finished reply's generated ids and the tokenizer/template they belong to (empty when
  // unknown): the next turn's prompt reuses them exactly (engine/chat_context.h).
  std::vector<int32_t> token_ids;
  std::vector<uint8_t> drafted;  // [token_ids.size()] 1 = accepted draft token (stored flags)
  uint64_t tokenizer_hash = 0;
  QString template_name;
  // A line the chat shows under the reply: why its context was re-prefilled (a switch between
  // PIPO and the lossless modes). Not stored.
  QString notice;
  // A PIPO reply made in this session: the pair sequence the backbone held after it
  // (storage's message_latents, kept here too) and the release that made it; empty otherwise.
  std::vector<int32_t> pipo_pairs;
  std::string pipo_release;
};

// What a reply's finish reason (engine/generator.h finish_reason_name()) means to the user, for
// the line under the reply: "" for "eos" (the model ended it) and unknown values, otherwise e.g.
// "cut off: max tokens per reply reached" for "length".
QString finish_reason_text(const QString& finish);

class ChatModel : public QAbstractListModel {
  Q_OBJECT

 public:
  enum Roles {
    RoleRole = Qt::UserRole + 1,  // QString "user" / "assistant" / "system"
    TextRole,                     // QString, the message text (also Qt::DisplayRole)
    StreamingRole,                // bool
    TokenCountRole,               // int
    DraftedCountRole,             // int, accepted draft tokens
    StatsRole,                    // QVariant<MessageStats>, invalid when none
    StatsTextRole,                // QString, format_stats() or empty
    FinishRole,                   // QString
    MessageIdRole,                // qint64 storage id
    PiecesRole,                   // QVariant<QList<TokenPiece>>
    SaveErrorRole,                // QString, why the message was not stored (empty: fine)
    AlternativesRole,             // QPoint(index, count) of a reply's alternatives
    NoticeRole,                   // QString, ChatItem::notice
  };
  Q_ENUM(Roles)

  explicit ChatModel(QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QHash<int, QByteArray> roleNames() const override;

  const ChatItem& item(int row) const { return items_.at(row); }
  const QList<ChatItem>& items() const { return items_; }

  // Replaces all rows (model reset).
  void setItems(QList<ChatItem> items);
  void clear() { setItems({}); }
  // Appends a row; returns its index.
  int append(const ChatItem& item);
  void removeAt(int row);
  // Streaming: adds one token (its text may be empty) emitted at verification step `step`.
  void appendToken(int row, const QString& text, bool drafted, int step);
  // Ends streaming of `row`: the authoritative final text, stats and finish reason.
  void finishReply(int row, const QString& text, const MessageStats& stats, const QString& finish);
  void setMessageId(int row, qint64 id);
  // Sets the alternatives shown on reply `row` ("‹ index+1/count ›").
  void setAlternatives(int row, int index, int count);
  // Marks `row` as not stored, with the reason (shown on the message).
  void setSaveError(int row, const QString& reason);
  // The notice line under reply `row` (ChatItem::notice); re-renders the row.
  void setNotice(int row, const QString& notice);
  // The latents of PIPO reply `row` (ChatItem::pipo_pairs / pipo_release); not rendered.
  void setPipoLatents(int row, std::vector<int32_t> pairs, std::string release);
  // Token pieces rebuilt for a reloaded reply (PieceRebuilder); re-renders the row.
  void setPieces(int row, const QList<TokenPiece>& pieces);

  // The conversation as engine messages, in order, skipping rows still streaming and empty
  // replies (what the next prompt is rendered from).
  std::vector<ChatMessage> chatMessages() const;
  // The same rows as chatMessages(), with each reply's stored ids, tokenizer hash and template.
  std::vector<ContextMessage> contextMessages() const;
  // Records the generated ids of reply `row` (after finishReply).
  void setReplyTokens(int row, std::vector<int32_t> ids, uint64_t tokenizer_hash, const QString& template_name);

  // Storage <-> model conversion.
  static ChatItem fromMessage(const Message& m);

 private:
  void changed(int row, const QList<int>& roles);
  QList<ChatItem> items_;
};

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::ui::TokenPiece)
