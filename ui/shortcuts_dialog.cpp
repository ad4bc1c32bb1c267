#include "ui/shortcuts_dialog.h"

#include <QAction>
#include <QDialogButtonBox>
#include <QHeaderView>
#include <QMenu>
#include <QMenuBar>
#include <QTableWidget>
#include <QVBoxLayout>

namespace specchat::ui {

namespace {

void collect(const QMenu* menu, QList<QPair<QString, QString>>& out) {
  for (const QAction* a : menu->actions()) {
    if (a->menu()) {
      collect(a->menu(), out);
      continue;
    }
    if (a->shortcut().isEmpty()) continue;
    QString what = a->text();
    what.remove(QLatin1Char('&'));
    what.remove(QStringLiteral("\u2026"));
    out.append({a->shortcut().toString(QKeySequence::NativeText), what});
  }
}

}  // namespace

QList<QPair<QString, QString>> shortcut_list(const QMenuBar* bar) {
  QList<QPair<QString, QString>> out;
  for (const QAction* a : bar->actions()) {
    if (a->menu()) collect(a->menu(), out);
  }
  const QPair<QKeySequence, QString> fixed[] = {
      {QKeySequence(Qt::Key_Return), ShortcutsDialog::tr("Send the message")},
      {QKeySequence(Qt::SHIFT | Qt::Key_Return), ShortcutsDialog::tr("New line in the message")},
      {QKeySequence(Qt::Key_Escape), ShortcutsDialog::tr("Stop the reply (in the search box: clear the search)")},
      {QKeySequence(Qt::Key_Delete), ShortcutsDialog::tr("Delete the selected conversation (in the list)")},
  };
  for (const auto& [keys, what] : fixed) out.append({keys.toString(QKeySequence::NativeText), what});
  return out;
}

ShortcutsDialog::ShortcutsDialog(const QMenuBar* bar, QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("shortcutsDialog"));
  setWindowTitle(tr("Keyboard shortcuts"));
  const QList<QPair<QString, QString>> rows = shortcut_list(bar);
  auto* table = new QTableWidget(static_cast<int>(rows.size()), 2);
  table->setObjectName(QStringLiteral("shortcutsTable"));
  table->setHorizontalHeaderLabels({tr("Keys"), tr("Action")});
  table->verticalHeader()->hide();
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setSelectionMode(QAbstractItemView::NoSelection);
  for (int r = 0; r < rows.size(); ++r) {
    table->setItem(r, 0, new QTableWidgetItem(rows[r].first));
    table->setItem(r, 1, new QTableWidgetItem(rows[r].second));
  }
  table->resizeColumnsToContents();
  table->horizontalHeader()->setStretchLastSection(true);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(table);
  layout->addWidget(buttons);
  resize(520, 420);
}

}  // namespace specchat::ui
