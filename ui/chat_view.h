// Read-only view of a ChatModel: one text document with a header per message ("You",
// "Assistant"), the message text, and a grey stats line under finished replies. A streamed
// token only appends its text at the end, so a long conversation costs nothing per token.
#pragma once

#include <QPointer>
#include <QString>
#include <QTextBrowser>
#include <QTextFormat>

#include <vector>

#include "ui/chat_model.h"

class QAction;

namespace specchat::ui {

// Draft visualization: assistant replies with known token pieces (ChatItem::pieces) are
// written piece by piece; tokens from accepted drafts get a soft background (when
// showDrafts()), and hovering any token shows "step N · drafted" / "step N · target".
class ChatView : public QTextBrowser {
  Q_OBJECT

 public:
  // Character-format properties of a rendered token (QTextFormat user properties).
  enum TokenProperty { StepProperty = QTextFormat::UserProperty + 1, DraftedProperty };

  explicit ChatView(QWidget* parent = nullptr);
  // Shows `model` (not owned; may be null) and follows its changes.
  void setModel(ChatModel* model);

  bool showDrafts() const { return show_drafts_; }
  // Checkable "Highlight draft tokens" action (object name showDraftsAction), owned by the
  // view, for the window's View menu; toggling it calls setShowDrafts.
  QAction* showDraftsAction() const { return show_drafts_action_; }
  // The text-format tooltip of the token at document position `pos` (empty when none).
  QString tokenToolTipAt(int pos) const;
  // The model row shown at document position `pos` (its header or its text); -1 when none.
  int rowAtPosition(int pos) const;
  // The model row under viewport point `p` (e.g. a context-menu position); -1 when none.
  int rowAt(const QPoint& p) const;
  // Background a drafted token is drawn with (derived from the palette).
  QColor draftBackground() const;

 public Q_SLOTS:
  void setShowDrafts(bool on);

 protected:
  bool event(QEvent* e) override;  // tooltips of the token under the mouse
  // A theme change re-renders the conversation: its colours come from the palette.
  void changeEvent(QEvent* e) override;
  void showEvent(QShowEvent* e) override;  // opens at the end of the conversation

 private:
  void writePieces(QTextCursor& c, const QList<TokenPiece>& pieces, int from);
  void rebuild();
  void rewriteFrom(int row);  // re-renders rows row .. end
  void writeRow(int row);     // appends row at the document end
  void onRowsInserted(int first);
  void onDataChanged(int first, int last);

  QPointer<ChatModel> model_;
  std::vector<int> starts_;   // [n_rows] document position where each row (header, then text) begins
  QString tail_text_;         // text rendered for the last row (streaming fast path)
  int tail_pieces_ = 0;       // pieces rendered for the last row (-1: rendered as plain text)
  bool show_drafts_ = true;
  QAction* show_drafts_action_;
};

}  // namespace specchat::ui
