// The first desktop window: the conversation, an input box with Send / Stop, and a status bar
// holding the status line (model loading, errors) and the stats of the last reply
// ("12.3 tok/s · α 0.41 · τ 2.10 · 64 tokens"). All behaviour lives in ChatController; the
// window lays out widgets and forwards user actions, so it never blocks on the engine.
#pragma once

#include <QMainWindow>

class QLabel;
class QPushButton;

namespace specchat::ui {

class ChatController;
class ChatView;
class PromptEdit;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // `controller` must outlive the window. Child widgets have object names for tests and
  // style sheets: chatView, promptInput, sendButton, stopButton, statusLabel, statsLabel.
  explicit MainWindow(ChatController* controller, QWidget* parent = nullptr);

 private:
  void buildMenus();
  void sendInput();
  void onBusyChanged(bool busy);
  void onStatusChanged(const QString& text, bool error);
  void onTitleChanged(const QString& title);

  ChatController* controller_;
  ChatView* view_;
  PromptEdit* input_;
  QPushButton* send_;
  QPushButton* stop_;
  QLabel* status_;
  QLabel* stats_;
};

}  // namespace specchat::ui
