#include "ui/chat_view.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QHelpEvent>
#include <QScrollBar>
#include <QTimer>
#include <QToolButton>
#include <QToolTip>

#include <algorithm>
#include <QTextBlockFormat>
#include <QTextCharFormat>
#include <QTextCursor>
#include <QAbstractTextDocumentLayout>

#include "ui/chat_model.h"
#include "ui/markdown_reply.h"
#include "ui/pipo_types.h"

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

// Within this many pixels of the end counts as "at the bottom".
constexpr int kBottomSlackPx = 4;

bool at_bottom(const QScrollBar* bar) { return bar->value() >= bar->maximum() - kBottomSlackPx; }

}  // namespace

ChatView::ChatView(QWidget* parent) : QTextBrowser(parent), show_drafts_action_(new QAction(tr("Highlight &draft tokens"), this)) {
  setReadOnly(true);
  setOpenLinks(false);
  setUndoRedoEnabled(false);
  setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard | Qt::LinksAccessibleByMouse);
  connect(this, &QTextBrowser::anchorClicked, this, &ChatView::onAnchor);
  show_drafts_action_->setObjectName(QStringLiteral("showDraftsAction"));
  show_drafts_action_->setCheckable(true);
  show_drafts_action_->setChecked(show_drafts_);
  show_drafts_action_->setToolTip(tr("Show tokens that came from accepted drafts on a tinted background"));
  connect(show_drafts_action_, &QAction::toggled, this, &ChatView::setShowDrafts);

  // Following the bottom is a state, not a check around each edit: the document lays itself out
  // lazily, so the scroll range grows after an edit returns. The range change scrolls along
  // while following; only the user's own scrolling (value changes outside a range change)
  // turns following off or on.
  QScrollBar* bar = verticalScrollBar();
  connect(bar, &QScrollBar::rangeChanged, this, [this, bar] {
    if (follow_) bar->setValue(bar->maximum());
    updateJumpButton();
  });
  connect(bar, &QScrollBar::valueChanged, this, [this, bar] {
    follow_ = at_bottom(bar);
    updateJumpButton();
  });
  jump_ = new QToolButton(viewport());
  jump_->setObjectName(QStringLiteral("jumpToLatestButton"));
  jump_->setText(tr("\u2193 Jump to latest"));
  jump_->setToolTip(tr("Scroll to the newest message and follow the reply"));
  jump_->setCursor(Qt::PointingHandCursor);
  jump_->hide();
  connect(jump_, &QToolButton::clicked, this, &ChatView::jumpToLatest);
}

void ChatView::onAnchor(const QUrl& url) {
  if (url.scheme() == QLatin1String(kAlternativeScheme)) {
    // "ROW,DELTA" (writeRow)
    const QStringList parts = url.path().split(QLatin1Char(','));
    bool row_ok = false, delta_ok = false;
    const int row = parts.value(0).toInt(&row_ok);
    const int delta = parts.value(1).toInt(&delta_ok);
    if (parts.size() == 2 && row_ok && delta_ok) Q_EMIT alternativeRequested(row, delta);
    return;
  }
  if (url.scheme() == QLatin1String(kContinueScheme)) {
    Q_EMIT continueRequested();
    return;
  }
  if (url.scheme() != QLatin1String(kCopyScheme)) return;
  bool ok = false;
  const int index = url.path().toInt(&ok);
  if (!ok || index < 0 || index >= code_blocks_.size()) return;
  QApplication::clipboard()->setText(code_blocks_.at(index));
  Q_EMIT codeCopied(code_blocks_.at(index));
}

QString ChatView::codeBlock(int index) const {
  return index >= 0 && index < code_blocks_.size() ? code_blocks_.at(index) : QString();
}

void ChatView::setDroppedRows(int rows) {
  if (rows == dropped_rows_) return;
  const int first = std::min(rows, dropped_rows_);
  dropped_rows_ = rows;
  if (model_ && first < static_cast<int>(starts_.size())) rewriteFrom(first);
}

void ChatView::jumpToLatest() {
  follow_ = true;
  verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  updateJumpButton();
}

void ChatView::updateJumpButton() {
  const bool show = !follow_ && verticalScrollBar()->maximum() > 0;
  if (show) {
    jump_->adjustSize();
    const QRect vp = viewport()->rect();
    jump_->move(vp.right() - jump_->width() - 12, vp.bottom() - jump_->height() - 12);
    jump_->raise();
  }
  jump_->setVisible(show);
}

void ChatView::resizeEvent(QResizeEvent* e) {
  QTextBrowser::resizeEvent(e);
  if (follow_) verticalScrollBar()->setValue(verticalScrollBar()->maximum());
  updateJumpButton();
}

void ChatView::setHighlight(const QString& text) {
  if (text == highlight_) return;
  highlight_ = text;
  applyHighlight(true);
}

void ChatView::applyHighlight(bool scroll) {
  QList<QTextEdit::ExtraSelection> marks;
  if (!highlight_.isEmpty()) {
    QTextCharFormat f;
    f.setBackground(QColor(0xff, 0xd5, 0x4f));
    f.setForeground(QColor(0x20, 0x20, 0x20));
    QTextCursor c(document());
    while (true) {
      c = document()->find(highlight_, c);
      if (c.isNull()) break;
      marks.append(QTextEdit::ExtraSelection{c, f});
    }
  }
  setExtraSelections(marks);
  if (scroll && !marks.isEmpty()) {
    QTextCursor first = marks.front().cursor;
    first.clearSelection();
    setTextCursor(first);
    ensureCursorVisible();
  }
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
  follow_ = true;
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
  const int n = model_ ? model_->rowCount() : 0;
  row = std::clamp(row, 0, static_cast<int>(starts_.size()));
  if (row == 0) {
    document()->clear();
    code_blocks_.clear();
  } else if (row < static_cast<int>(starts_.size())) {
    QTextCursor c(document());
    c.setPosition(starts_[static_cast<size_t>(row)]);
    c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    c.removeSelectedText();
  }
  starts_.resize(static_cast<size_t>(row));
  if (continue_row_ >= row) continue_row_ = -1;  // written again below when it still applies
  for (int r = row; r < n; ++r) writeRow(r);
  if (!highlight_.isEmpty()) applyHighlight(false);
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
  if (row < dropped_rows_) c.insertText(tr(" \u00b7 left out of the context"), stats_format(pal, font()));
  QTextBlockFormat body_block;
  body_block.setTopMargin(2);
  c.insertBlock(body_block, body_format(pal));
  // Pieces when they add up to (a prefix of) the text: the final text may complete a UTF-8
  // tail the pieces held back, which is appended plain.
  QString joined;
  for (const TokenPiece& p : it.pieces) joined += p.text;
  if (it.role == QLatin1String("assistant") && !it.streaming && !it.text.isEmpty()) {
    // A finished reply: rendered as Markdown, the token pieces laid over the rendered text.
    const MarkdownReply md = prepare_markdown(it.text, static_cast<int>(code_blocks_.size()));
    code_blocks_.append(md.code_blocks);
    const int from = c.position();
    const int to = insert_markdown(c, md, pal.color(QPalette::AlternateBase));
    if (!it.pieces.isEmpty()) {
      annotate_pieces(document(), from, to, it.pieces, draftBackground(), show_drafts_, StepProperty, DraftedProperty);
    }
    tail_pieces_ = -1;  // not appendable: the streaming fast path re-renders
  } else if (!it.pieces.isEmpty() && it.text.startsWith(joined)) {
    writePieces(c, it.pieces, 0);
    c.insertText(it.text.mid(joined.size()), body_format(pal));
    tail_pieces_ = it.text.size() == joined.size() ? static_cast<int>(it.pieces.size()) : -1;
  } else {
    c.insertText(it.text, body_format(pal));
    tail_pieces_ = it.pieces.isEmpty() ? 0 : -1;
  }
  if (!it.streaming && it.role == QLatin1String("assistant")) {
    QStringList parts;
    if (it.has_stats) parts << model_->data(model_->index(row), ChatModel::StatsTextRole).toString();
    if (const QString reason = finish_reason_text(it.finish); !reason.isEmpty()) parts << reason;
    // A last reply that stopped short can be continued (ChatController::continueReply).
    const bool can_continue = row == model_->rowCount() - 1 && !it.text.isEmpty() &&
                              (it.finish == QLatin1String("length") || it.finish == QLatin1String("cancelled"));
    if (!parts.isEmpty() || can_continue) {
      c.insertBlock(QTextBlockFormat(), stats_format(pal, font()));
      const QString line = parts.join(QStringLiteral(" \u00b7 "));
      const QString label = QString::fromUtf8(kPipoLabel);
      if (line.startsWith(label)) {  // a PIPO reply: the label stands out from the figures
        QTextCharFormat warn = stats_format(pal, font());
        warn.setForeground(QColor(0xb9, 0x77, 0x0e));
        warn.setToolTip(tr("Generated in the PIPO mode: the second token of each step was proposed by the MTP "
                           "head and kept by a confidence head, not checked by the target model"));
        c.insertText(label, warn);
        c.insertText(line.mid(label.size()), stats_format(pal, font()));
      } else {
        c.insertText(line, stats_format(pal, font()));
      }
    }
    if (can_continue) {
      QTextCharFormat link = stats_format(pal, font());
      if (!parts.isEmpty()) c.insertText(QStringLiteral(" \u00b7 "), link);
      link.setAnchor(true);
      link.setForeground(pal.color(QPalette::Link));
      link.setAnchorHref(QStringLiteral("%1:last").arg(QLatin1String(kContinueScheme)));
      link.setToolTip(tr("Generate more of this reply, from where it stopped"));
      c.insertText(tr("Continue"), link);
      continue_row_ = row;
    }
    if (!it.notice.isEmpty()) {  // a mode switch (PIPO / lossless): how this reply's context was built
      QTextCharFormat note = stats_format(pal, font());
      note.setFontItalic(true);
      c.insertBlock(QTextBlockFormat(), note);
      c.insertText(it.notice, note);
    }
  }
  if (it.alt_count > 1 && !it.streaming) {
    // "‹ 2/3 ›": links to the previous / next alternative at this place (anchorClicked):
    // regenerated or continued replies, or the versions of an edited message.
    const bool reply = it.role == QLatin1String("assistant");
    QTextCharFormat f = stats_format(pal, font());
    c.insertBlock(QTextBlockFormat(), f);
    QTextCharFormat link = f;
    link.setAnchor(true);
    link.setForeground(pal.color(QPalette::Link));
    link.setAnchorHref(QStringLiteral("%1:%2,-1").arg(QLatin1String(kAlternativeScheme)).arg(row));
    link.setToolTip(reply ? tr("Previous reply, with the turns that followed it")
                          : tr("Previous version of this message, with the turns that followed it"));
    c.insertText(QStringLiteral("\u2039"), link);
    c.insertText(QStringLiteral(" %1/%2 ").arg(it.alt_index + 1).arg(it.alt_count), f);
    link.setAnchorHref(QStringLiteral("%1:%2,1").arg(QLatin1String(kAlternativeScheme)).arg(row));
    link.setToolTip(reply ? tr("Next reply, with the turns that followed it")
                          : tr("Next version of this message, with the turns that followed it"));
    c.insertText(QStringLiteral("\u203a"), link);
  }
  if (!it.save_error.isEmpty()) {
    QTextCharFormat warn = stats_format(pal, font());
    warn.setForeground(QColor(0xc0, 0x39, 0x2b));
    c.insertBlock(QTextBlockFormat(), warn);
    c.insertText(tr("\u26a0 Not saved: %1").arg(it.save_error), warn);
  }
  tail_text_ = it.text;
}

void ChatView::onRowsInserted(int first) {
  if (!model_) return;
  if (first != static_cast<int>(starts_.size())) {
    rebuild();
    return;
  }
  // The old last reply loses its "Continue" link: only the last reply can be continued.
  if (continue_row_ >= 0 && continue_row_ < first) {
    rewriteFrom(continue_row_);
    return;
  }
  for (int r = first; r < model_->rowCount(); ++r) writeRow(r);
  if (!highlight_.isEmpty()) applyHighlight(false);
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
