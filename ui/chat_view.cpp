#include "ui/chat_view.h"

#include <QScrollBar>

#include <algorithm>
#include <QTextBlockFormat>
#include <QTextCharFormat>
#include <QTextCursor>

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

ChatView::ChatView(QWidget* parent) : QTextBrowser(parent) {
  setReadOnly(true);
  setOpenLinks(false);
  setUndoRedoEnabled(false);
  setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
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

void ChatView::rebuild() { rewriteFrom(0); }

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
  c.insertText(it.text, body_format(pal));
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
    c.insertText(it.text.mid(tail_text_.size()), body_format(palette()));
    tail_text_ = it.text;
    return;
  }
  rewriteFrom(first);
}

}  // namespace specchat::ui
