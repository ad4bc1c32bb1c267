// The main window: sidebar (conversations) on the left; in the center the system prompt, the
// conversation, an input box with Send / Stop / Regenerate; on the right a slot for the live
// panel ("livePanelSlot", filled by setLivePanel); an error banner above the chat and a status
// bar with the status line and the stats of the last reply. All behaviour lives in
// ChatController; the window lays out widgets and forwards user actions, so it never blocks on
// the engine or the database.
//
// Keyboard: Enter sends, Shift+Enter new line, Ctrl+N new chat, Esc stops, Ctrl+F search,
// Ctrl+R regenerates, F2 renames the selected conversation, Ctrl+, opens Settings.
#pragma once

#include <QMainWindow>

#include "ui/settings.h"
#include "ui/storage_worker.h"

class QAction;
class QLabel;
class QLineEdit;
class QMenu;
class QPushButton;
class QSplitter;
class QVBoxLayout;

namespace specchat::ui {

class ChatController;
class ChatView;
class PromptEdit;
class Sidebar;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // `controller` must outlive the window. Child widgets have object names for tests and
  // style sheets: chatView, promptInput, sendButton, stopButton, regenerateButton,
  // systemPromptEdit, errorBanner, statusLabel, statsLabel, livePanelSlot, sidebar (see
  // sidebar.h for its children); menus fileMenu, editMenu (with deleteConversationAction),
  // viewMenu, helpMenu (shortcutsAction: Help › Keyboard shortcuts, Ctrl+/).
  explicit MainWindow(ChatController* controller, QWidget* parent = nullptr);

  // Puts `panel` (the live panel) into the right-hand slot and shows it; the window owns it.
  void setLivePanel(QWidget* panel);
  // Puts `meter` (the context meter) under the input box; the window owns it.
  void setContextMeter(QWidget* meter);
  // Adds an action (e.g. "Compare…", "Show live panel") to the View menu.
  void addViewAction(QAction* action);
  QMenu* viewMenu() const { return view_menu_; }
  Sidebar* sidebar() const { return sidebar_; }

  // Settings shown by the Settings dialog and saved to `file` (empty = the platform default)
  // when the user accepts it. gui_main passes what it loaded (with command-line overrides).
  void setAppSettings(const AppSettings& s, const QString& file);
  const AppSettings& appSettings() const { return settings_; }
  // Applies a target and draft picked in the model library: remembered as recent, the draft
  // model (or the n-gram drafter when `draft` is empty) chosen, then applySettings.
  void useModels(const QString& target, const QString& draft, const QStringList& folders);
  // Applies accepted settings: saves them, hands the generation settings to the controller,
  // reloads the models when the paths changed and applies the theme.
  void applySettings(const AppSettings& s);

 public Q_SLOTS:
  void openSettings();
  // File › Models…: the model library; a picked target (and draft) is applied like Settings.
  void openModelLibrary();
  // File dialogs, then ChatController::exportConversation / importJson.
  void exportAs(specchat::ui::ExportFormat format);
  void importConversation();
  // Copies chat row `row`'s text to the clipboard (last row when `row` < 0).
  void copyMessage(int row);

 private:
  void buildMenus();
  void sendInput();
  void showChatMenu(const QPoint& pos);
  void onBusyChanged(bool busy);
  void onStatusChanged(const QString& text, bool error);
  void onTitleChanged(const QString& title);

  ChatController* controller_;
  Sidebar* sidebar_;
  QLineEdit* system_prompt_;
  QLabel* banner_;
  ChatView* view_;
  PromptEdit* input_;
  QPushButton* send_;
  QPushButton* stop_;
  QPushButton* regenerate_;
  QLabel* status_;
  QLabel* stats_;
  QLabel* server_;  // "serverStatusLabel": the app server's URL or why it is not running
  QSplitter* splitter_;
  QWidget* live_slot_;
  QVBoxLayout* center_layout_ = nullptr;
  QMenu* view_menu_ = nullptr;
  AppSettings settings_;
  QString settings_file_;
};

}  // namespace specchat::ui
