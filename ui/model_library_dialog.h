// File › Models…: the model library (model_library.h) as a dialog. Folders to scan (the
// bundled models' folder first, then the user's, kept in the settings), a table of the GGUF
// files with their metadata, size and whether they fit in this machine's memory, and for the
// selected target its compatible drafts and the drafters it can use. One click on "Use" (or a
// double click) picks the target with the chosen draft; recently used targets come first.
// Object names: modelFolders, addFolderButton, modelTable, draftList, useModelButton,
// modelDetails.
#pragma once

#include <QDialog>

#include "ui/model_library.h"

class QLabel;
class QListWidget;
class QPushButton;
class QTableWidget;

namespace specchat::ui {

class ModelLibraryDialog : public QDialog {
  Q_OBJECT

 public:
  // `folders` to scan; `recent` target paths, most recent first (shown first, marked).
  ModelLibraryDialog(const QStringList& folders, const QStringList& recent, QWidget* parent = nullptr);

  const QList<ModelEntry>& models() const { return models_; }
  QStringList folders() const { return folders_; }
  // Selects the table row of `path` (tests, and the current target on open); false if absent.
  bool selectModel(const QString& path);
  // The compatible drafts listed for the selected target (empty entry = none).
  const QList<ModelEntry>& drafts() const { return drafts_; }
  // The choice once accepted: target path and draft path ("" = no draft model).
  QString chosenTarget() const { return chosen_target_; }
  QString chosenDraft() const { return chosen_draft_; }

 public Q_SLOTS:
  void addFolder(const QString& folder);
  void rescan();

 private:
  void onSelection();
  void use();

  QStringList folders_;
  QStringList recent_;
  QList<ModelEntry> models_;
  QList<ModelEntry> drafts_;
  QListWidget* folder_list_;
  QTableWidget* table_;
  QListWidget* draft_list_;
  QLabel* details_;
  QPushButton* use_;
  QString chosen_target_, chosen_draft_;
};

}  // namespace specchat::ui
