// The message input: a plain-text editor where Enter sends and Shift+Enter starts a new line.
#pragma once

#include <QPlainTextEdit>

namespace specchat::ui {

class PromptEdit : public QPlainTextEdit {
  Q_OBJECT

 public:
  explicit PromptEdit(QWidget* parent = nullptr);

 Q_SIGNALS:
  // Enter or Return without Shift. The text is left in place: the receiver reads and clears it.
  void submitted();

 protected:
  void keyPressEvent(QKeyEvent* event) override;
};

}  // namespace specchat::ui
