#include "ui/file_dialogs.h"

#include <QFileDialog>
#include <QFileInfo>

namespace specchat::ui {

namespace {

QString run(QFileDialog& d) {
  make_safe(d);
  if (d.exec() != QDialog::Accepted || d.selectedFiles().isEmpty()) return {};
  return d.selectedFiles().constFirst();
}

}  // namespace

QIcon NameOnlyIconProvider::icon(IconType type) const { return QAbstractFileIconProvider::icon(type); }

QIcon NameOnlyIconProvider::icon(const QFileInfo& info) const {
  return QAbstractFileIconProvider::icon(info.isDir() ? Folder : File);
}

QString NameOnlyIconProvider::type(const QFileInfo& info) const {
  if (info.isDir()) return QObject::tr("Folder");
  const QString suffix = info.suffix();
  return suffix.isEmpty() ? QObject::tr("File") : QObject::tr("%1 file").arg(suffix.toUpper());
}

void make_safe(QFileDialog& dialog) {
  static NameOnlyIconProvider provider;  // stateless; outlives every dialog
  dialog.setOption(QFileDialog::DontUseNativeDialog, true);
  dialog.setIconProvider(&provider);
}

QString open_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter) {
  QFileDialog d(parent, caption, dir, filter);
  d.setAcceptMode(QFileDialog::AcceptOpen);
  d.setFileMode(QFileDialog::ExistingFile);
  return run(d);
}

QString existing_directory(QWidget* parent, const QString& caption, const QString& dir) {
  QFileDialog d(parent, caption, dir);
  d.setAcceptMode(QFileDialog::AcceptOpen);
  d.setFileMode(QFileDialog::Directory);
  d.setOption(QFileDialog::ShowDirsOnly, true);
  return run(d);
}

QString save_file_name(QWidget* parent, const QString& caption, const QString& dir, const QString& filter) {
  QFileDialog d(parent, caption, dir, filter);
  d.setAcceptMode(QFileDialog::AcceptSave);
  d.setFileMode(QFileDialog::AnyFile);
  return run(d);
}

}  // namespace specchat::ui
