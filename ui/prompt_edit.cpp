#include "ui/prompt_edit.h"

#include <QKeyEvent>

namespace specchat::ui {

PromptEdit::PromptEdit(QWidget* parent) : QPlainTextEdit(parent) {
  setTabChangesFocus(true);
  setPlaceholderText(tr("Type a message \u2014 Enter sends, Shift+Enter adds a line"));
}

void PromptEdit::keyPressEvent(QKeyEvent* event) {
  const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
  if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
    event->accept();
    Q_EMIT submitted();
    return;
  }
  if (enter) {
    // Shift+Enter: QPlainTextEdit would insert a line separator (U+2028); we want a plain '\n'.
    insertPlainText(QStringLiteral("\n"));
    event->accept();
    return;
  }
  QPlainTextEdit::keyPressEvent(event);
}

}  // namespace specchat::ui
