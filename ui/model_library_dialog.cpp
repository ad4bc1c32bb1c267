#include "ui/model_library_dialog.h"

#include <QDialogButtonBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QLocale>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "ui/file_dialogs.h"
#include "ui/live_panel.h"

namespace specchat::ui {

namespace {

enum Column { kName, kParams, kTypes, kContext, kVocab, kSize, kFits, kColumns };

}  // namespace

ModelLibraryDialog::ModelLibraryDialog(const QStringList& folders, const QStringList& recent, QWidget* parent)
    : QDialog(parent),
      recent_(recent),
      folder_list_(new QListWidget),
      table_(new QTableWidget(0, kColumns)),
      draft_list_(new QListWidget),
      details_(new QLabel),
      use_(new QPushButton(tr("Use"))) {
  setObjectName(QStringLiteral("modelLibraryDialog"));
  setWindowTitle(tr("Models"));
  folder_list_->setObjectName(QStringLiteral("modelFolders"));
  folder_list_->setMaximumHeight(70);
  table_->setObjectName(QStringLiteral("modelTable"));
  table_->setHorizontalHeaderLabels(
      {tr("Model"), tr("Parameters"), tr("Weights"), tr("Context"), tr("Vocabulary"), tr("Size"), tr("Fits in RAM")});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  draft_list_->setObjectName(QStringLiteral("draftList"));
  draft_list_->setMaximumHeight(110);
  details_->setObjectName(QStringLiteral("modelDetails"));
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  use_->setObjectName(QStringLiteral("useModelButton"));
  use_->setEnabled(false);
  use_->setToolTip(tr("Load the selected target with the selected draft"));
  auto* add = new QPushButton(tr("Add folder\u2026"));
  add->setObjectName(QStringLiteral("addFolderButton"));
  connect(add, &QPushButton::clicked, this, [this] {
    const QString dir = existing_directory(this, tr("Folder with GGUF models"), QString());
    if (!dir.isEmpty()) addFolder(dir);
  });
  auto* folder_row = new QHBoxLayout;
  folder_row->addWidget(folder_list_, 1);
  folder_row->addWidget(add, 0, Qt::AlignTop);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  buttons->addButton(use_, QDialogButtonBox::AcceptRole);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(use_, &QPushButton::clicked, this, &ModelLibraryDialog::use);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &ModelLibraryDialog::onSelection);
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this] { use(); });

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(new QLabel(tr("Folders:")));
  layout->addLayout(folder_row);
  layout->addWidget(table_, 1);
  layout->addWidget(details_);
  layout->addWidget(new QLabel(tr("Drafters for the selected target (same vocabulary, smaller):")));
  layout->addWidget(draft_list_);
  layout->addWidget(buttons);
  resize(860, 560);
  for (const QString& f : folders) {
    if (!f.isEmpty() && !folders_.contains(f)) folders_ << f;
  }
  rescan();
}

void ModelLibraryDialog::addFolder(const QString& folder) {
  if (folder.isEmpty() || folders_.contains(folder)) return;
  folders_ << folder;
  rescan();
}

void ModelLibraryDialog::rescan() {
  folder_list_->clear();
  folder_list_->addItems(folders_);
  models_ = scan_model_folders(folders_);
  // Recently used targets first, in their order; the rest by path.
  std::stable_sort(models_.begin(), models_.end(), [this](const ModelEntry& a, const ModelEntry& b) {
    const qsizetype ia = recent_.indexOf(a.path), ib = recent_.indexOf(b.path);
    return (ia < 0 ? recent_.size() : ia) < (ib < 0 ? recent_.size() : ib);
  });
  const qint64 ram = physical_memory_bytes();
  const QLocale loc;
  table_->setRowCount(static_cast<int>(models_.size()));
  for (int r = 0; r < models_.size(); ++r) {
    const ModelEntry& e = models_[r];
    QString name = e.name;
    if (recent_.contains(e.path)) name = tr("\u2605 %1").arg(name);
    auto set = [&](int col, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      item->setToolTip(e.ok() ? e.path : tr("%1: %2").arg(e.path, e.error));
      table_->setItem(r, col, item);
    };
    set(kName, name);
    set(kSize, format_bytes(static_cast<size_t>(e.size_bytes)));
    if (!e.ok()) {
      set(kParams, tr("unusable: %1").arg(e.error));
      continue;
    }
    set(kParams, format_params(e.n_params));
    set(kTypes, e.weight_types.join(QStringLiteral(", ")));
    set(kContext, e.n_ctx_train > 0 ? loc.toString(e.n_ctx_train) : tr("?"));
    set(kVocab, tr("%1 \u00b7 %2").arg(loc.toString(e.n_vocab)).arg(e.vocab_hash, 8, 16, QLatin1Char('0')).left(24));
    set(kFits, ram == 0 ? tr("?") : fits_in_memory(e.size_bytes, ram) ? tr("yes") : tr("no"));
  }
  table_->resizeColumnsToContents();
  onSelection();
}

bool ModelLibraryDialog::selectModel(const QString& path) {
  const QString abs = QFileInfo(path).absoluteFilePath();
  for (int r = 0; r < models_.size(); ++r) {
    if (models_[r].path == abs) {
      table_->selectRow(r);
      return true;
    }
  }
  return false;
}

void ModelLibraryDialog::onSelection() {
  draft_list_->clear();
  drafts_.clear();
  const QList<QTableWidgetItem*> sel = table_->selectedItems();
  const int row = sel.isEmpty() ? -1 : sel.front()->row();
  if (row < 0 || row >= models_.size()) {
    details_->setText(models_.isEmpty() ? tr("No GGUF files in these folders.") : tr("Select a model."));
    use_->setEnabled(false);
    return;
  }
  const ModelEntry& t = models_[row];
  if (!t.ok()) {
    details_->setText(tr("%1 cannot be used: %2").arg(t.path, t.error));
    use_->setEnabled(false);
    return;
  }
  details_->setText(tr("%1 \u00b7 %2 \u00b7 chat template %3 \u00b7 %4")
                        .arg(t.architecture.isEmpty() ? tr("unknown architecture") : t.architecture,
                             format_params(t.n_params) + tr(" parameters"),
                             t.chat_template_name.isEmpty() ? tr("not recognised (the specchat format is used)")
                                                            : t.chat_template_name,
                             t.path));
  drafts_ = compatible_drafts(t, models_);
  for (const ModelEntry& d : drafts_) {
    auto* item = new QListWidgetItem(tr("Draft model: %1 (%2 parameters)").arg(d.name, format_params(d.n_params)));
    item->setData(Qt::UserRole, d.path);
    item->setToolTip(d.path);
    draft_list_->addItem(item);
  }
  auto* ngram = new QListWidgetItem(tr("N-gram lookup in the prompt (no draft model)"));
  ngram->setData(Qt::UserRole, QString());
  draft_list_->addItem(ngram);
  draft_list_->setCurrentRow(0);  // the smallest compatible draft, the fastest drafter
  use_->setEnabled(true);
}

void ModelLibraryDialog::use() {
  const QList<QTableWidgetItem*> sel = table_->selectedItems();
  const int row = sel.isEmpty() ? -1 : sel.front()->row();
  if (row < 0 || row >= models_.size() || !models_[row].ok()) return;
  chosen_target_ = models_[row].path;
  const QListWidgetItem* d = draft_list_->currentItem();
  chosen_draft_ = d ? d->data(Qt::UserRole).toString() : QString();
  accept();
}

}  // namespace specchat::ui
