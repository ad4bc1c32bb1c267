// Read-only view of a ChatModel: one text document with a header per message ("You",
// "Assistant"), the message text, and a grey stats line under finished replies. A streamed
// token only appends its text at the end, so a long conversation costs nothing per token.
#pragma once

#include <QPointer>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <QTextBrowser>
#include <QTextFormat>

#include <vector>

#include "ui/chat_model.h"

class QAction;
class QToolButton;

namespace specchat::ui {

// URL scheme of the "‹ i/n ›" links under a reply with regenerated alternatives; the path is
// the step, -1 or 1.
inline constexpr const char* kAlternativeScheme = "specchat-alt";
// URL scheme of the "Continue" link after the finish reason of a last reply that stopped short
// (max tokens, or stopped by the user).
inline constexpr const char* kContinueScheme = "specchat-continue";

// Scrolling: while the user is at the bottom, the view follows new messages and the streaming
// reply; after the user scrolls up it stays put and a "Jump to latest" button (object name
// jumpToLatestButton) floats over the bottom right corner until they are back at the bottom.
//
// Search highlight: setHighlight(text) marks every case-insensitive occurrence of text.
//
// Finished assistant replies are rendered as Markdown (ui/markdown_reply.h): code blocks in a
// fixed-pitch font with a "<language> · Copy" line; Copy puts the exact code on the clipboard.
// A streaming reply shows its raw text until it ends.
//
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
  // Whether the view follows the end of the conversation (the user is at the bottom).
  bool followsBottom() const { return follow_; }
  // The highlighted search text and how many occurrences are marked.
  QString highlight() const { return highlight_; }
  int highlightCount() const { return static_cast<int>(extraSelections().size()); }

 public Q_SLOTS:
  void setShowDrafts(bool on);
  // Marks every case-insensitive occurrence of `text` (empty clears) and scrolls to the first.
  void setHighlight(const QString& text);
  // Scrolls to the end and follows it again.
  void jumpToLatest();
  // Marks model rows [0, rows) as "left out of the context" (the context meter's count).
  void setDroppedRows(int rows);

 Q_SIGNALS:
  // A code block's Copy link put `code` on the clipboard.
  void codeCopied(const QString& code);
  // The "‹" (-1) or "›" (+1) of row `row`'s alternatives was clicked.
  void alternativeRequested(int row, int delta);
  // The "Continue" link of the last reply was clicked.
  void continueRequested();

 public:
  // Code of the view's fenced block `index` (the n in its Copy link), "" when out of range.
  QString codeBlock(int index) const;
  int codeBlockCount() const { return static_cast<int>(code_blocks_.size()); }
  int droppedRows() const { return dropped_rows_; }
  // The row whose "Continue" link is shown (the last reply, when it stopped short); -1 = none.
  int continueRow() const { return continue_row_; }

 protected:
  bool event(QEvent* e) override;  // tooltips of the token under the mouse
  // A theme change re-renders the conversation: its colours come from the palette.
  void changeEvent(QEvent* e) override;
  void showEvent(QShowEvent* e) override;  // opens at the end of the conversation
  void resizeEvent(QResizeEvent* e) override;  // keeps the jump button in its corner

 private:
  void writePieces(QTextCursor& c, const QList<TokenPiece>& pieces, int from);
  void rebuild();
  void rewriteFrom(int row);  // re-renders rows row .. end
  void writeRow(int row);     // appends row at the document end
  void onRowsInserted(int first);
  void onDataChanged(int first, int last);
  void applyHighlight(bool scroll);
  void onAnchor(const QUrl& url);
  void updateJumpButton();

  QPointer<ChatModel> model_;
  std::vector<int> starts_;   // [n_rows] document position where each row (header, then text) begins
  QString tail_text_;         // text rendered for the last row (streaming fast path)
  int tail_pieces_ = 0;       // pieces rendered for the last row (-1: rendered as plain text)
  bool show_drafts_ = true;
  QAction* show_drafts_action_;
  bool follow_ = true;           // at the bottom: range growth scrolls along
  QString highlight_;
  int dropped_rows_ = 0;
  QStringList code_blocks_;      // fenced code of the rendered replies, by Copy link index
  QToolButton* jump_;
  int continue_row_ = -1;  // row with a "Continue" link; re-rendered (without it) when rows follow
};

}  // namespace specchat::ui
