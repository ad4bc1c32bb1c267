// The conversation sidebar: a search box (Ctrl+F focuses it), a New button, the conversation
// list (newest first; click opens, F2 / double-click / context menu renames, Delete key or
// context menu deletes) and an undo bar shown for ChatController::kUndoMs after a deletion.
// Esc in the search box clears it. Object names: searchBox, newChatButton, conversationList, undoBar, undoLabel, undoButton.
#pragma once

#include <QWidget>

class QLabel;
class QLineEdit;
class QListView;
class QPushButton;

namespace specchat::ui {

class ChatController;

class Sidebar : public QWidget {
  Q_OBJECT

 public:
  explicit Sidebar(ChatController* controller, QWidget* parent = nullptr);

  QLineEdit* searchBox() const { return search_; }
  QListView* list() const { return list_; }
  // Starts editing the selected conversation's title (F2).
  void renameSelected();
  void deleteSelected();

 protected:
  // Esc in the search box clears the search (when it holds text).
  bool eventFilter(QObject* watched, QEvent* e) override;

 private:
  void selectCurrent();
  void showMenu(const QPoint& pos);

  ChatController* controller_;
  QLineEdit* search_;
  QPushButton* new_;
  QListView* list_;
  QWidget* undo_bar_;
  QLabel* undo_label_;
};

}  // namespace specchat::ui
