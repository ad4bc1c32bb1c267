#include "ui/sidebar.h"

#include <QAction>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QPushButton>
#include <QShortcut>
#include <QVBoxLayout>

#include "ui/chat_controller.h"

namespace specchat::ui {

Sidebar::Sidebar(ChatController* controller, QWidget* parent)
    : QWidget(parent),
      controller_(controller),
      search_(new QLineEdit),
      new_(new QPushButton(tr("New chat"))),
      list_(new QListView),
      undo_bar_(new QWidget),
      undo_label_(new QLabel) {
  setObjectName(QStringLiteral("sidebar"));
  search_->setObjectName(QStringLiteral("searchBox"));
  search_->setPlaceholderText(tr("Search conversations (Ctrl+F)"));
  search_->setClearButtonEnabled(true);
  new_->setObjectName(QStringLiteral("newChatButton"));
  new_->setToolTip(tr("New conversation (Ctrl+N)"));
  list_->setObjectName(QStringLiteral("conversationList"));
  list_->setModel(controller_->conversations());
  list_->setEditTriggers(QAbstractItemView::EditKeyPressed | QAbstractItemView::DoubleClicked);
  list_->setSelectionMode(QAbstractItemView::SingleSelection);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  list_->setUniformItemSizes(true);
  undo_bar_->setObjectName(QStringLiteral("undoBar"));
  undo_label_->setObjectName(QStringLiteral("undoLabel"));
  undo_label_->setWordWrap(true);
  auto* undo = new QPushButton(tr("Undo"));
  undo->setObjectName(QStringLiteral("undoButton"));
  auto* undo_layout = new QHBoxLayout(undo_bar_);
  undo_layout->setContentsMargins(0, 0, 0, 0);
  undo_layout->addWidget(undo_label_, 1);
  undo_layout->addWidget(undo);
  undo_bar_->hide();

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(9, 9, 0, 9);  // the chat column's own margin supplies the gap
  layout->addWidget(search_);
  layout->addWidget(new_);
  layout->addWidget(list_, 1);
  layout->addWidget(undo_bar_);

  connect(search_, &QLineEdit::textChanged, controller_, &ChatController::setSearch);
  search_->installEventFilter(this);
  connect(new_, &QPushButton::clicked, controller_, &ChatController::newConversation);
  connect(list_, &QListView::clicked, this, [this](const QModelIndex& i) {
    controller_->openConversation(controller_->conversations()->idAt(i.row()));
  });
  connect(list_, &QListView::customContextMenuRequested, this, &Sidebar::showMenu);
  auto* del = new QShortcut(QKeySequence::Delete, list_, nullptr, nullptr, Qt::WidgetShortcut);
  connect(del, &QShortcut::activated, this, &Sidebar::deleteSelected);
  connect(undo, &QPushButton::clicked, controller_, &ChatController::undoDelete);
  connect(controller_, &ChatController::deletePending, this, [this](const QString& title) {
    undo_label_->setText(tr("Deleted \u201c%1\u201d").arg(title));
    undo_bar_->show();
  });
  connect(controller_, &ChatController::deleteSettled, undo_bar_, &QWidget::hide);
  connect(controller_->conversations(), &QAbstractItemModel::modelReset, this, &Sidebar::selectCurrent);
  connect(controller_, &ChatController::conversationChanged, this, &Sidebar::selectCurrent);
  selectCurrent();
}

void Sidebar::selectCurrent() {
  const int row = controller_->conversations()->rowOf(controller_->conversationId());
  if (row < 0) {
    list_->clearSelection();
    return;
  }
  list_->setCurrentIndex(controller_->conversations()->index(row));
}

bool Sidebar::eventFilter(QObject* watched, QEvent* e) {
  // Esc in a search box with text clears the search; the window's Esc (stop the reply) is only
  // overridden then, so an empty box still lets Esc stop a reply.
  if (watched == search_ && (e->type() == QEvent::ShortcutOverride || e->type() == QEvent::KeyPress)) {
    auto* k = static_cast<QKeyEvent*>(e);
    if (k->key() == Qt::Key_Escape && k->modifiers() == Qt::NoModifier && !search_->text().isEmpty()) {
      if (e->type() == QEvent::ShortcutOverride) {
        e->accept();  // deliver Esc to the box as a key press instead of the window's shortcut
      } else {
        search_->clear();
      }
      return true;
    }
  }
  return QWidget::eventFilter(watched, e);
}

void Sidebar::renameSelected() {
  const QModelIndex i = list_->currentIndex();
  if (i.isValid()) list_->edit(i);
}

void Sidebar::deleteSelected() {
  const QModelIndex i = list_->currentIndex();
  if (i.isValid()) controller_->deleteConversation(controller_->conversations()->idAt(i.row()));
}

void Sidebar::showMenu(const QPoint& pos) {
  const QModelIndex i = list_->indexAt(pos);
  if (!i.isValid()) return;
  list_->setCurrentIndex(i);
  QMenu menu(this);
  QAction* rename = menu.addAction(tr("Rename"));
  rename->setShortcut(QKeySequence(Qt::Key_F2));
  QAction* remove = menu.addAction(tr("Delete"));
  remove->setShortcut(QKeySequence::Delete);
  QAction* chosen = menu.exec(list_->viewport()->mapToGlobal(pos));
  if (chosen == rename) renameSelected();
  if (chosen == remove) deleteSelected();
}

}  // namespace specchat::ui
