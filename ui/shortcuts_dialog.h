// Help › Keyboard shortcuts: every shortcut of the window in one table, read from the menus'
// actions (so the list cannot drift from what the keys do) plus the keys that are not menu
// actions (Enter, Shift+Enter, Esc, F2 in the list, Esc in the search box).
#pragma once

#include <QDialog>
#include <QList>
#include <QPair>
#include <QString>

class QMenuBar;

namespace specchat::ui {

// (key sequence in the platform's text, what it does) for every action of `bar` that has a
// shortcut, menus in order, then the fixed keys. Action texts lose their '&' and '…'.
QList<QPair<QString, QString>> shortcut_list(const QMenuBar* bar);

// The dialog (object name shortcutsDialog) with the table (object name shortcutsTable).
class ShortcutsDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ShortcutsDialog(const QMenuBar* bar, QWidget* parent = nullptr);
};

}  // namespace specchat::ui
