#include "ui/chat_view.h"

#include <QAction>
#include <QHelpEvent>
#include <QScrollBar>
#include <QTimer>
#include <QToolTip>

#include <algorithm>
#include <QTextBlockFormat>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QAbstractTextDocumentLayout>

#include "ui/chat_model.h"

namespace specchat::ui {

namespace {

QString header_for(const QString& role) {
  if (role == QLatin1String("user")) return ChatView::tr("You");
  if (role == QLatin1String("assistant")) return ChatView::tr("Assistant");
  return ChatView::tr("System");
}

QTextCharFormat header_format(const QString& role, const QPalette& pal) {
  QTextCharFormat f;
  f.setFontWeight(QFont::Bold);
  f.setForeground(role == QLatin1String("user") ? pal.color(QPalette::Link) : pal.color(QPalette::Text));
  return f;
}

QTextCharFormat body_format(const QPalette& pal) {
  QTextCharFormat f;
  f.setForeground(pal.color(QPalette::Text));
  return f;
}

QTextCharFormat stats_format(const QPalette& pal, const QFont& font) {
  QTextCharFormat f;
  f.setForeground(pal.color(QPalette::PlaceholderText));
  if (font.pointSizeF() > 0) f.setFontPointSize(font.pointSizeF() * 0.85);
  return f;
}

// Keeps the view pinned to the bottom across an edit when it was at the bottom before.
class StickToBottom {
 public:
  explicit StickToBottom(QScrollBar* bar) : bar_(bar), at_bottom_(bar->value() >= bar->maximum() - 4) {}
  ~StickToBottom() {
    if (at_bottom_) bar_->setValue(bar_->maximum());
  }
  StickToBottom(const StickToBottom&) = delete;
  StickToBottom& operator=(const StickToBottom&) = delete;

 private:
  QScrollBar* bar_;
  bool at_bottom_;
};

}  // namespace

ChatView::ChatView(QWidget* parent) : QTextBrowser(parent), show_drafts_action_(new QAction(tr("Highlight &draft tokens"), this)) {
  setReadOnly(true);
  setOpenLinks(false);
  setUndoRedoEnabled(false);
  setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  show_drafts_action_->setObjectName(QStringLiteral("showDraftsAction"));
  show_drafts_action_->setCheckable(true);
  show_drafts_action_->setChecked(show_drafts_);
  show_drafts_action_->setToolTip(tr("Show tokens that came from accepted drafts on a tinted background"));
  connect(show_drafts_action_, &QAction::toggled, this, &ChatView::setShowDrafts);
}

void ChatView::setShowDrafts(bool on) {
  if (on == show_drafts_) return;
  show_drafts_ = on;
  show_drafts_action_->setChecked(on);
  rebuild();
}

QColor ChatView::draftBackground() const {
  // A soft tint of the highlight colour over the base: visible on light and dark themes
  // without hurting the text's contrast.
  const QColor h = palette().color(QPalette::Highlight);
  const QColor b = palette().color(QPalette::Base);
  constexpr double kMix = 0.22;
  return QColor::fromRgbF(static_cast<float>(b.redF() * (1 - kMix) + h.redF() * kMix),
                          static_cast<float>(b.greenF() * (1 - kMix) + h.greenF() * kMix),
                          static_cast<float>(b.blueF() * (1 - kMix) + h.blueF() * kMix));
}

void ChatView::writePieces(QTextCursor& c, const QList<TokenPiece>& pieces, int from) {
  const QTextCharFormat plain = body_format(palette());
  const QColor tint = draftBackground();
  for (int i = from; i < pieces.size(); ++i) {
    const TokenPiece& p = pieces.at(i);
    if (p.text.isEmpty()) continue;
    QTextCharFormat f = plain;
    f.setProperty(StepProperty, p.step);
    f.setProperty(DraftedProperty, p.drafted);
    f.setToolTip(p.drafted ? tr("step %1 · drafted").arg(p.step) : tr("step %1 · target").arg(p.step));
    if (p.drafted && show_drafts_) f.setBackground(tint);
    c.insertText(p.text, f);
  }
}

QString ChatView::tokenToolTipAt(int pos) const {
  QTextCursor c(document());
  if (pos < 0 || pos >= document()->characterCount() - 1) return {};
  c.setPosition(pos + 1);  // charFormat() is the format of the character before the cursor
  return c.charFormat().toolTip();
}

int ChatView::rowAtPosition(int pos) const {
  if (pos < 0 || starts_.empty()) return -1;
  // starts_[r] is where row r (its header, then its text) begins; rows follow each other.
  return static_cast<int>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
}

int ChatView::rowAt(const QPoint& p) const { return rowAtPosition(cursorForPosition(p).position()); }

void ChatView::changeEvent(QEvent* e) {
  QTextBrowser::changeEvent(e);
  if (e->type() == QEvent::PaletteChange && model_) rebuild();
}

bool ChatView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QPoint vp = viewport()->mapFromGlobal(help->globalPos());
    const QString tip = tokenToolTipAt(document()->documentLayout()->hitTest(
        QPointF(vp.x() + horizontalScrollBar()->value(), vp.y() + verticalScrollBar()->value()), Qt::ExactHit));
    if (tip.isEmpty()) QToolTip::hideText();
    else QToolTip::showText(help->globalPos(), tip, this);
    return true;
  }
  return QTextBrowser::event(e);
}

void ChatView::setModel(ChatModel* model) {
  if (model_) disconnect(model_, nullptr, this, nullptr);
  model_ = model;
  if (model_) {
    connect(model_, &QAbstractItemModel::modelReset, this, &ChatView::rebuild);
    connect(model_, &QAbstractItemModel::rowsRemoved, this, &ChatView::rebuild);
    connect(model_, &QAbstractItemModel::rowsMoved, this, &ChatView::rebuild);
    connect(model_, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex&, int first, int) { onRowsInserted(first); });
    connect(model_, &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex& tl, const QModelIndex& br, const QList<int>& roles) {
              // The storage id does not show: no need to re-render for it.
              if (roles.size() == 1 && roles.front() == ChatModel::MessageIdRole) return;
              onDataChanged(tl.row(), br.row());
            });
  }
  rebuild();
}

void ChatView::rebuild() {
  rewriteFrom(0);
  // A conversation opens at its end (its latest reply). The layout of a hidden or resizing view
  // settles later, so the scroll also runs once the event loop has laid it out.
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  QTimer::singleShot(0, this, [this] { verticalScrollBar()->setValue(verticalScrollBar()->maximum()); });
}

void ChatView::showEvent(QShowEvent* e) {
  QTextBrowser::showEvent(e);
  QTimer::singleShot(0, this, [this] { verticalScrollBar()->setValue(verticalScrollBar()->maximum()); });
}

void ChatView::rewriteFrom(int row) {
  StickToBottom stick(verticalScrollBar());
  const int n = model_ ? model_->rowCount() : 0;
  row = std::clamp(row, 0, static_cast<int>(starts_.size()));
  if (row == 0) {
    document()->clear();
  } else if (row < static_cast<int>(starts_.size())) {
    QTextCursor c(document());
    c.setPosition(starts_[static_cast<size_t>(row)]);
    c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    c.removeSelectedText();
  }
  starts_.resize(static_cast<size_t>(row));
  for (int r = row; r < n; ++r) writeRow(r);
}

void ChatView::writeRow(int row) {
  const ChatItem& it = model_->item(row);
  const QPalette pal = palette();
  QTextCursor c(document());
  c.movePosition(QTextCursor::End);
  starts_.push_back(c.position());
  QTextBlockFormat block;
  block.setTopMargin(row == 0 ? 0 : 10);
  if (row == 0) {
    c.setBlockFormat(block);
  } else {
    c.insertBlock(block);
  }
  c.insertText(header_for(it.role), header_format(it.role, pal));
  QTextBlockFormat body_block;
  body_block.setTopMargin(2);
  c.insertBlock(body_block, body_format(pal));
  // Pieces when they add up to (a prefix of) the text: the final text may complete a UTF-8
  // tail the pieces held back, which is appended plain.
  QString joined;
  for (const TokenPiece& p : it.pieces) joined += p.text;
  if (!it.pieces.isEmpty() && it.text.startsWith(joined)) {
    writePieces(c, it.pieces, 0);
    c.insertText(it.text.mid(joined.size()), body_format(pal));
    tail_pieces_ = it.text.size() == joined.size() ? static_cast<int>(it.pieces.size()) : -1;
  } else {
    c.insertText(it.text, body_format(pal));
    tail_pieces_ = it.pieces.isEmpty() ? 0 : -1;
  }
  if (it.has_stats && !it.streaming) {
    c.insertBlock(QTextBlockFormat(), stats_format(pal, font()));
    QString line = model_->data(model_->index(row), ChatModel::StatsTextRole).toString();
    if (it.finish == QLatin1String("cancelled")) line += tr(" \u00b7 stopped");
    c.insertText(line, stats_format(pal, font()));
  }
  tail_text_ = it.text;
}

void ChatView::onRowsInserted(int first) {
  StickToBottom stick(verticalScrollBar());
  if (!model_) return;
  if (first != static_cast<int>(starts_.size())) {
    rebuild();
    return;
  }
  for (int r = first; r < model_->rowCount(); ++r) writeRow(r);
}

void ChatView::onDataChanged(int first, int last) {
  if (!model_ || first < 0 || first >= static_cast<int>(starts_.size())) {
    rebuild();
    return;
  }
  const int n = model_->rowCount();
  const ChatItem& it = model_->item(n - 1);
  if (first == n - 1 && last == n - 1 && it.streaming && it.text.startsWith(tail_text_)) {
    // Streaming fast path: the last row only grew; append the new text at the end.
    StickToBottom stick(verticalScrollBar());
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    if (tail_pieces_ >= 0 && tail_pieces_ <= it.pieces.size()) {
      QString added;
      for (int i = tail_pieces_; i < it.pieces.size(); ++i) added += it.pieces.at(i).text;
      if (tail_text_ + added == it.text) {
        writePieces(c, it.pieces, tail_pieces_);
        tail_pieces_ = static_cast<int>(it.pieces.size());
        tail_text_ = it.text;
        return;
      }
    }
    c.insertText(it.text.mid(tail_text_.size()), body_format(palette()));
    tail_pieces_ = -1;
    tail_text_ = it.text;
    return;
  }
  rewriteFrom(first);
}

}  // namespace specchat::ui
