#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QShortcut>
#include <QStatusBar>
#include <QVBoxLayout>

#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/prompt_edit.h"

namespace specchat::ui {

MainWindow::MainWindow(ChatController* controller, QWidget* parent)
    : QMainWindow(parent),
      controller_(controller),
      view_(new ChatView),
      input_(new PromptEdit),
      send_(new QPushButton(tr("Send"))),
      stop_(new QPushButton(tr("Stop"))),
      status_(new QLabel),
      stats_(new QLabel) {
  view_->setObjectName(QStringLiteral("chatView"));
  input_->setObjectName(QStringLiteral("promptInput"));
  send_->setObjectName(QStringLiteral("sendButton"));
  stop_->setObjectName(QStringLiteral("stopButton"));
  status_->setObjectName(QStringLiteral("statusLabel"));
  stats_->setObjectName(QStringLiteral("statsLabel"));

  view_->setModel(controller_->model());
  // About four lines of input; the conversation takes the rest.
  input_->setFixedHeight(QFontMetrics(input_->font()).lineSpacing() * 4 + 12);
  send_->setDefault(true);
  stop_->setToolTip(tr("Stop generating (Esc)"));
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setWordWrap(true);

  auto* buttons = new QVBoxLayout;
  buttons->addWidget(send_);
  buttons->addWidget(stop_);
  buttons->addStretch(1);
  auto* input_row = new QHBoxLayout;
  input_row->addWidget(input_, 1);
  input_row->addLayout(buttons);
  auto* central = new QWidget;
  auto* layout = new QVBoxLayout(central);
  layout->addWidget(view_, 1);
  layout->addLayout(input_row);
  setCentralWidget(central);
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(stats_);
  buildMenus();

  connect(input_, &PromptEdit::submitted, this, &MainWindow::sendInput);
  connect(send_, &QPushButton::clicked, this, &MainWindow::sendInput);
  connect(stop_, &QPushButton::clicked, controller_, &ChatController::stop);
  auto* esc = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  connect(esc, &QShortcut::activated, controller_, &ChatController::stop);
  connect(controller_, &ChatController::busyChanged, this, &MainWindow::onBusyChanged);
  connect(controller_, &ChatController::statsChanged, stats_, &QLabel::setText);
  connect(controller_, &ChatController::statusChanged, this, &MainWindow::onStatusChanged);
  connect(controller_, &ChatController::titleChanged, this, &MainWindow::onTitleChanged);

  stats_->setText(controller_->statsText());
  onStatusChanged(controller_->statusText(), controller_->statusIsError());
  onTitleChanged(controller_->title());
  onBusyChanged(controller_->isBusy());
  resize(760, 640);
  input_->setFocus();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* fresh = file->addAction(tr("&New conversation"));
  fresh->setShortcut(QKeySequence::New);
  connect(fresh, &QAction::triggered, controller_, &ChatController::newConversation);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"));
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);
}

void MainWindow::sendInput() {
  if (controller_->isBusy()) return;  // keep the draft; the user can send when the reply ends
  const QString text = input_->toPlainText();
  if (text.trimmed().isEmpty()) return;
  controller_->send(text);
  input_->clear();
}

void MainWindow::onBusyChanged(bool busy) {
  send_->setEnabled(!busy);
  stop_->setEnabled(busy);
}

void MainWindow::onStatusChanged(const QString& text, bool error) {
  status_->setText(text);
  status_->setStyleSheet(error ? QStringLiteral("color: #c0392b;") : QString());
}

void MainWindow::onTitleChanged(const QString& title) {
  setWindowTitle(title.isEmpty() ? tr("SpecChat") : tr("%1 \u2014 SpecChat").arg(title));
}

}  // namespace specchat::ui
