// File dialogs that never open the files they list.
//
// Qt's file dialog sniffs each listed file's content to choose its icon and type. Opening and
// closing any descriptor of the SQLite database, or of its -wal/-shm files, drops every POSIX
// (fcntl) lock this process holds on them. Another SQLite client can then checkpoint and delete
// the WAL while the app is still writing to it, so later commits are lost
// (sqlite.org/howtocorrupt.html §2.2). A browse through the database's folder is all it takes.
// The app's dialogs therefore use Qt's own dialog with an icon provider that decides by name only.
#pragma once

#include <QAbstractFileIconProvider>
#include <QString>

class QFileDialog;
class QWidget;

namespace specchat::ui {

// Icons and type names from the file name alone (folder / file, "<SUFFIX> file").
class NameOnlyIconProvider : public QAbstractFileIconProvider {
 public:
  QIcon icon(IconType type) const override;
  QIcon icon(const QFileInfo& info) const override;
  QString type(const QFileInfo& info) const override;
};

// Sets up `dialog` as the app's dialogs are: Qt's own widget dialog, NameOnlyIconProvider.
void make_safe(QFileDialog& dialog);

// Like QFileDialog::getOpenFileName / getSaveFileName (empty when cancelled), through make_safe.
QString open_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter);
QString save_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter);
// Like QFileDialog::getExistingDirectory (empty when cancelled), through make_safe.
QString existing_directory(QWidget* parent, const QString& caption, const QString& dir);

}  // namespace specchat::ui
