#include "ui/file_dialogs.h"
#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QFileInfo>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QVBoxLayout>

#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/prompt_edit.h"
#include "engine/model_pair.h"
#include "ui/model_library_dialog.h"
#include "ui/settings_dialog.h"
#include "ui/shortcuts_dialog.h"
#include "ui/sidebar.h"

namespace specchat::ui {

MainWindow::MainWindow(ChatController* controller, QWidget* parent)
    : QMainWindow(parent),
      controller_(controller),
      sidebar_(new Sidebar(controller)),
      system_prompt_(new QLineEdit),
      banner_(new QLabel),
      view_(new ChatView),
      input_(new PromptEdit),
      send_(new QPushButton(tr("Send"))),
      stop_(new QPushButton(tr("Stop"))),
      regenerate_(new QPushButton(tr("Regenerate"))),
      status_(new QLabel),
      stats_(new QLabel),
      server_(new QLabel),
      splitter_(new QSplitter(Qt::Horizontal)),
      live_slot_(new QWidget) {
  system_prompt_->setObjectName(QStringLiteral("systemPromptEdit"));
  banner_->setObjectName(QStringLiteral("errorBanner"));
  view_->setObjectName(QStringLiteral("chatView"));
  input_->setObjectName(QStringLiteral("promptInput"));
  send_->setObjectName(QStringLiteral("sendButton"));
  stop_->setObjectName(QStringLiteral("stopButton"));
  regenerate_->setObjectName(QStringLiteral("regenerateButton"));
  status_->setObjectName(QStringLiteral("statusLabel"));
  stats_->setObjectName(QStringLiteral("statsLabel"));
  server_->setObjectName(QStringLiteral("serverStatusLabel"));
  server_->setTextInteractionFlags(Qt::TextSelectableByMouse);  // the URL can be copied
  server_->hide();  // shown while Settings › Server is on
  splitter_->setObjectName(QStringLiteral("mainSplitter"));
  live_slot_->setObjectName(QStringLiteral("livePanelSlot"));

  system_prompt_->setPlaceholderText(tr("System prompt for this conversation (optional)"));
  system_prompt_->setClearButtonEnabled(true);
  banner_->setWordWrap(true);
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setStyleSheet(QStringLiteral("background: #fdecea; color: #8e1b10; padding: 6px; border-radius: 4px;"));
  banner_->hide();
  view_->setModel(controller_->model());
  view_->setContextMenuPolicy(Qt::CustomContextMenu);
  // About four lines of input; the conversation takes the rest.
  input_->setFixedHeight(QFontMetrics(input_->font()).lineSpacing() * 4 + 12);
  send_->setDefault(true);
  stop_->setToolTip(tr("Stop generating (Esc)"));
  regenerate_->setToolTip(tr("Generate the last reply again (Ctrl+R); the old one is kept"));
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->setWordWrap(true);

  auto* buttons = new QVBoxLayout;
  buttons->addWidget(send_);
  buttons->addWidget(stop_);
  buttons->addWidget(regenerate_);
  buttons->addStretch(1);
  auto* input_row = new QHBoxLayout;
  input_row->addWidget(input_, 1);
  input_row->addLayout(buttons);
  auto* center = new QWidget;
  center->setObjectName(QStringLiteral("chatArea"));
  auto* layout = new QVBoxLayout(center);
  layout->addWidget(system_prompt_);
  layout->addWidget(banner_);
  layout->addWidget(view_, 1);
  layout->addLayout(input_row);
  center_layout_ = layout;
  auto* live_layout = new QVBoxLayout(live_slot_);
  live_layout->setContentsMargins(0, 0, 0, 0);
  live_slot_->hide();  // empty until setLivePanel
  splitter_->addWidget(sidebar_);
  splitter_->addWidget(center);
  splitter_->addWidget(live_slot_);
  splitter_->setStretchFactor(0, 0);
  splitter_->setStretchFactor(1, 1);
  splitter_->setStretchFactor(2, 0);
  splitter_->setSizes({220, 640, 0});
  setCentralWidget(splitter_);
  statusBar()->addWidget(status_, 1);
  statusBar()->addPermanentWidget(stats_);
  statusBar()->addPermanentWidget(server_);
  connect(controller_, &ChatController::serverStateChanged, this, [this](const ServerState& st) {
    if (st.running) {
      server_->setText(tr("Server: %1").arg(st.url));
      QString tip = tr("Serving the loaded models to other programs (%1 requests at once)").arg(st.parallel);
      if (!st.pipo_release.isEmpty()) {
        tip += tr("; PIPO (approximate: not verified by the target) for requests that ask for it: %1").arg(st.pipo_release);
      } else if (!st.pipo_error.isEmpty()) {
        tip += tr("; PIPO unavailable: %1").arg(st.pipo_error);
      }
      server_->setToolTip(tip);
      server_->setStyleSheet(QString());
    } else if (!st.error.isEmpty()) {
      server_->setText(tr("Server: not running"));
      server_->setToolTip(st.error);
      server_->setStyleSheet(QStringLiteral("color: #c0392b;"));
    } else {
      server_->clear();
    }
    server_->setVisible(settings_.server.enabled);
  });
  buildMenus();

  connect(input_, &PromptEdit::submitted, this, &MainWindow::sendInput);
  connect(send_, &QPushButton::clicked, this, &MainWindow::sendInput);
  connect(stop_, &QPushButton::clicked, controller_, &ChatController::stop);
  connect(regenerate_, &QPushButton::clicked, controller_, &ChatController::regenerate);
  auto* esc = new QShortcut(QKeySequence(Qt::Key_Escape), this);
  connect(esc, &QShortcut::activated, controller_, &ChatController::stop);
  connect(system_prompt_, &QLineEdit::editingFinished, this,
          [this] { controller_->setSystemPrompt(system_prompt_->text()); });
  connect(controller_, &ChatController::systemPromptChanged, this, [this](const QString& text) {
    if (system_prompt_->text() != text) system_prompt_->setText(text);
  });
  connect(view_, &QWidget::customContextMenuRequested, this, &MainWindow::showChatMenu);
  connect(controller_, &ChatController::searchChanged, view_, &ChatView::setHighlight);
  connect(view_, &ChatView::alternativeRequested, controller_, &ChatController::showAlternative);
  connect(view_, &ChatView::continueRequested, controller_, &ChatController::continueReply);
  connect(controller_, &ChatController::busyChanged, this, &MainWindow::onBusyChanged);
  connect(controller_, &ChatController::statsChanged, stats_, &QLabel::setText);
  connect(controller_, &ChatController::statusChanged, this, &MainWindow::onStatusChanged);
  connect(controller_, &ChatController::titleChanged, this, &MainWindow::onTitleChanged);
  connect(controller_, &ChatController::exported, this,
          [this](const QString& path) { onStatusChanged(tr("Exported to %1").arg(path), false); });

  stats_->setText(controller_->statsText());
  system_prompt_->setText(controller_->systemPrompt());
  onStatusChanged(controller_->statusText(), controller_->statusIsError());
  onTitleChanged(controller_->title());
  onBusyChanged(controller_->isBusy());
  resize(1100, 700);
  input_->setFocus();
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->setObjectName(QStringLiteral("fileMenu"));
  QAction* fresh = file->addAction(tr("&New conversation"));
  fresh->setObjectName(QStringLiteral("newConversationAction"));
  fresh->setShortcut(QKeySequence::New);
  connect(fresh, &QAction::triggered, this, [this] {
    controller_->newConversation();
    input_->setFocus(Qt::ShortcutFocusReason);  // ready to type the first message
  });
  file->addSeparator();
  QAction* import = file->addAction(tr("&Import conversation (JSON)\u2026"));
  import->setObjectName(QStringLiteral("importAction"));
  connect(import, &QAction::triggered, this, &MainWindow::importConversation);
  QMenu* exp = file->addMenu(tr("&Export conversation"));
  const std::pair<const char*, ExportFormat> formats[] = {
      {"Markdown\u2026", ExportFormat::markdown}, {"HTML\u2026", ExportFormat::html}, {"JSON\u2026", ExportFormat::json}};
  for (const auto& [label, format] : formats) {
    QAction* a = exp->addAction(tr(label));
    const ExportFormat f = format;
    connect(a, &QAction::triggered, this, [this, f] { exportAs(f); });
  }
  file->addSeparator();
  QAction* models = file->addAction(tr("&Models\u2026"));
  models->setObjectName(QStringLiteral("modelsAction"));
  models->setToolTip(tr("The GGUF models in your folders, with the drafts each target can use"));
  models->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_M));
  connect(models, &QAction::triggered, this, &MainWindow::openModelLibrary);
  QAction* settings = file->addAction(tr("&Settings\u2026"));
  settings->setObjectName(QStringLiteral("settingsAction"));
  settings->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Comma));
  connect(settings, &QAction::triggered, this, &MainWindow::openSettings);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"));
  quit->setShortcut(QKeySequence::Quit);
  connect(quit, &QAction::triggered, this, &QWidget::close);

  QMenu* edit = menuBar()->addMenu(tr("&Edit"));
  edit->setObjectName(QStringLiteral("editMenu"));
  QAction* find = edit->addAction(tr("&Find conversation"));
  find->setObjectName(QStringLiteral("findAction"));
  find->setShortcut(QKeySequence::Find);
  connect(find, &QAction::triggered, this, [this] {
    sidebar_->searchBox()->setFocus(Qt::ShortcutFocusReason);
    sidebar_->searchBox()->selectAll();
  });
  QAction* rename = edit->addAction(tr("&Rename conversation"));
  rename->setShortcut(QKeySequence(Qt::Key_F2));
  connect(rename, &QAction::triggered, sidebar_, &Sidebar::renameSelected);
  QAction* regen = edit->addAction(tr("Re&generate last reply"));
  regen->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  connect(regen, &QAction::triggered, controller_, &ChatController::regenerate);
  QAction* cont = edit->addAction(tr("Co&ntinue last reply"));
  cont->setObjectName(QStringLiteral("continueReplyAction"));
  cont->setToolTip(tr("Generate more of the last reply when it stopped short (max tokens, or stopped)"));
  connect(cont, &QAction::triggered, controller_, &ChatController::continueReply);
  QAction* copy_last = edit->addAction(tr("&Copy last message"));
  connect(copy_last, &QAction::triggered, this, [this] { copyMessage(-1); });
  edit->addSeparator();
  QAction* del = edit->addAction(tr("&Delete conversation"));
  del->setObjectName(QStringLiteral("deleteConversationAction"));
  del->setToolTip(tr("Delete the open conversation (it can be undone for a few seconds)"));
  connect(del, &QAction::triggered, this, [this] {
    if (controller_->conversationId() != 0) controller_->deleteConversation(controller_->conversationId());
  });

  view_menu_ = menuBar()->addMenu(tr("&View"));
  view_menu_->setObjectName(QStringLiteral("viewMenu"));

  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->setObjectName(QStringLiteral("helpMenu"));
  QAction* keys = help->addAction(tr("&Keyboard shortcuts"));
  keys->setObjectName(QStringLiteral("shortcutsAction"));
  keys->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Slash));
  connect(keys, &QAction::triggered, this, [this] {
    ShortcutsDialog dialog(menuBar(), this);
    dialog.exec();
  });
}

void MainWindow::setLivePanel(QWidget* panel) {
  live_slot_->layout()->addWidget(panel);
  live_slot_->show();
  QList<int> sizes = splitter_->sizes();
  if (sizes.size() == 3 && sizes[2] == 0) splitter_->setSizes({220, 600, 300});
}

void MainWindow::setContextMeter(QWidget* meter) { center_layout_->addWidget(meter); }

void MainWindow::addViewAction(QAction* action) { view_menu_->addAction(action); }

void MainWindow::setAppSettings(const AppSettings& s, const QString& file) {
  settings_ = s;
  settings_file_ = file;
}

void MainWindow::applySettings(const AppSettings& s) {
  const bool models_changed = s.target_path != settings_.target_path || s.draft_path != settings_.draft_path ||
                              s.chat_template != settings_.chat_template || s.kv_type != settings_.kv_type ||
                              s.activations != settings_.activations;
  const bool server_changed = s.server != settings_.server;
  settings_ = s;
  if (!save_settings(s, settings_file_)) {
    onStatusChanged(tr("Could not save the settings."), true);
  }
  controller_->setSettings(s.generation);
  controller_->setRemote(s.engine);
  controller_->setChatTemplate(s.chat_template);
  controller_->setCompute(s.kv_type, s.activations);
  if (server_changed) controller_->setServer(s.server);
  apply_theme(s.theme);
  if (models_changed) {
    const ModelPaths paths = models_to_load(s);
    controller_->loadModels(paths.target, paths.draft);
  }
}

void MainWindow::openSettings() {
  SettingsDialog dialog(settings_, this);
  if (dialog.exec() == QDialog::Accepted) applySettings(dialog.settings());
}

void MainWindow::openModelLibrary() {
  QStringList folders{QString::fromStdString(bundled_models_dir())};
  folders << settings_.model_folders;
  ModelLibraryDialog dialog(folders, settings_.recent_models, this);
  if (!settings_.target_path.isEmpty()) dialog.selectModel(settings_.target_path);
  if (dialog.exec() == QDialog::Accepted) useModels(dialog.chosenTarget(), dialog.chosenDraft(), dialog.folders());
}

void MainWindow::useModels(const QString& target, const QString& draft, const QStringList& folders) {
  AppSettings s = settings_;
  s.model_folders.clear();
  const QString bundled = QString::fromStdString(bundled_models_dir());
  for (const QString& f : folders) {
    if (f != bundled) s.model_folders << f;
  }
  s.target_path = target;
  s.draft_path = draft;
  s.generation.drafter = draft.isEmpty() ? DrafterKind::ngram : DrafterKind::model;
  if (s.generation.draft_k <= 0) s.generation.draft_k = GenerationSettings{}.draft_k;
  s.recent_models.removeAll(target);
  s.recent_models.prepend(target);
  while (s.recent_models.size() > 8) s.recent_models.removeLast();
  applySettings(s);
}

void MainWindow::exportAs(ExportFormat format) {
  QString filter, suffix;
  switch (format) {
    case ExportFormat::markdown: filter = tr("Markdown (*.md)"); suffix = QStringLiteral(".md"); break;
    case ExportFormat::html: filter = tr("HTML (*.html)"); suffix = QStringLiteral(".html"); break;
    case ExportFormat::json: filter = tr("JSON (*.json)"); suffix = QStringLiteral(".json"); break;
  }
  QString name = controller_->title().simplified();
  name.replace(QRegularExpression(QStringLiteral("[^\\w\\- ]")), QStringLiteral("_"));
  QString path = save_file_name(this, tr("Export conversation"), name + suffix, filter);
  if (path.isEmpty()) return;
  if (QFileInfo(path).suffix().isEmpty()) path += suffix;
  controller_->exportConversation(format, path);
}

void MainWindow::importConversation() {
  const QString path = open_file_name(this, tr("Import conversation"), QString(),
                                      tr("SpecChat JSON (*.json);;All files (*)"));
  if (!path.isEmpty()) controller_->importJson(path);
}

void MainWindow::copyMessage(int row) {
  if (row < 0) row = controller_->model()->rowCount() - 1;
  const QString text = controller_->messageText(row);
  if (!text.isEmpty()) QApplication::clipboard()->setText(text);
}

void MainWindow::showChatMenu(const QPoint& pos) {
  QMenu menu(this);
  const int row = view_->rowAt(pos);
  QAction* copy_this = menu.addAction(tr("Copy this message"));
  copy_this->setEnabled(row >= 0);
  QAction* copy_sel = menu.addAction(tr("Copy selection"));
  copy_sel->setEnabled(view_->textCursor().hasSelection());
  QAction* copy_last = menu.addAction(tr("Copy last message"));
  QAction* copy_all = menu.addAction(tr("Copy conversation"));
  menu.addSeparator();
  const bool user_row = row >= 0 && controller_->model()->item(row).role == QLatin1String("user");
  QAction* edit = menu.addAction(tr("Edit and resend\u2026"));
  edit->setToolTip(tr("Change this message and generate a new reply; the old turn stays as a branch"));
  edit->setEnabled(user_row && !controller_->isBusy());
  QAction* del = menu.addAction(tr("Delete message"));
  del->setEnabled(row >= 0 && !controller_->isBusy());
  menu.addSeparator();
  QAction* regen = menu.addAction(tr("Regenerate last reply"));
  regen->setEnabled(!controller_->isBusy());
  QAction* cont = menu.addAction(tr("Continue last reply"));
  cont->setEnabled(!controller_->isBusy() && controller_->canContinue());
  QAction* chosen = menu.exec(view_->viewport()->mapToGlobal(pos));
  if (chosen == copy_this) copyMessage(row);
  if (chosen == copy_sel) view_->copy();
  if (chosen == copy_last) copyMessage(-1);
  if (chosen == copy_all) QApplication::clipboard()->setText(view_->toPlainText());
  if (chosen == regen) controller_->regenerate();
  if (chosen == cont) controller_->continueReply();
  if (chosen == del) controller_->deleteMessage(row);
  if (chosen == edit) {
    bool ok = false;
    const QString text = QInputDialog::getMultiLineText(this, tr("Edit message"), tr("Message:"),
                                                        controller_->messageText(row), &ok);
    if (ok) controller_->editMessage(row, text);
  }
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
  regenerate_->setEnabled(!busy);
}

void MainWindow::onStatusChanged(const QString& text, bool error) {
  status_->setText(text);
  status_->setStyleSheet(error ? QStringLiteral("color: #c0392b;") : QString());
  // Errors also show in a banner above the chat: the status bar is easy to miss.
  banner_->setText(error ? text : QString());
  banner_->setVisible(error && !text.isEmpty());
}

void MainWindow::onTitleChanged(const QString& title) {
  setWindowTitle(title.isEmpty() ? tr("SpecChat") : tr("%1 \u2014 SpecChat").arg(title));
}

}  // namespace specchat::ui
