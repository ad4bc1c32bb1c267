#include "ui/context_meter.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QMetaObject>
#include <QProgressBar>

#include "ui/chat_controller.h"
#include "ui/chat_view.h"
#include "ui/engine_worker.h"
#include "ui/prompt_edit.h"

namespace specchat::ui {

ContextMeter::ContextMeter(ChatController* controller, EngineWorker* worker, PromptEdit* input, ChatView* view,
                           QWidget* parent)
    : QWidget(parent), controller_(controller), worker_(worker), input_(input), view_(view),
      bar_(new QProgressBar), label_(new QLabel) {
  setObjectName(QStringLiteral("contextMeter"));
  bar_->setObjectName(QStringLiteral("contextMeterBar"));
  label_->setObjectName(QStringLiteral("contextMeterLabel"));
  bar_->setTextVisible(false);
  bar_->setMaximumWidth(160);
  bar_->setMaximumHeight(10);
  bar_->setRange(0, 1);
  bar_->setValue(0);
  label_->setText(tr("Context: counted once the model is loaded"));
  QPalette dim = label_->palette();
  dim.setColor(QPalette::WindowText, dim.color(QPalette::PlaceholderText));
  label_->setPalette(dim);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(bar_);
  layout->addWidget(label_, 1);
  setToolTip(tr("Tokens the next prompt takes: system prompt, conversation and the message being typed, "
                "against the model's context (part of it is kept free for the reply)"));

  timer_.setSingleShot(true);
  timer_.setInterval(kDebounceMs);
  connect(&timer_, &QTimer::timeout, this, &ContextMeter::refresh);
  connect(input_, &QPlainTextEdit::textChanged, this, &ContextMeter::schedule);
  connect(controller_, &ChatController::conversationChanged, this, &ContextMeter::schedule);
  connect(controller_, &ChatController::systemPromptChanged, this, &ContextMeter::schedule);
  connect(controller_, &ChatController::busyChanged, this, &ContextMeter::schedule);
  ChatModel* model = controller_->model();
  connect(model, &QAbstractItemModel::modelReset, this, &ContextMeter::schedule);
  connect(model, &QAbstractItemModel::rowsInserted, this, &ContextMeter::schedule);
  connect(model, &QAbstractItemModel::rowsRemoved, this, &ContextMeter::schedule);
  connect(worker_, &EngineWorker::modelsLoaded, this, &ContextMeter::schedule, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::contextMeasured, this, &ContextMeter::onMeasured, Qt::QueuedConnection);
}

void ContextMeter::schedule() { timer_.start(); }

void ContextMeter::refresh() {
  ContextRequest r;
  r.id = ++last_id_;
  r.messages = controller_->contextMessages();
  r.has_system = !r.messages.empty() && r.messages.front().message.role == "system";
  r.messages.push_back(ContextMessage{ChatMessage{"user", input_->toPlainText().trimmed().toStdString()}, {}, 0, {}});
  r.max_tokens = controller_->settings().max_tokens;
  QMetaObject::invokeMethod(worker_, [w = worker_, r] { w->measureContext(r); }, Qt::QueuedConnection);
}

void ContextMeter::onMeasured(const ContextUsage& u) {
  if (u.id != last_id_) return;  // a newer count is on its way
  usage_ = u;
  if (!u.ok) {
    label_->setText(tr("Context: counted once the model is loaded"));
    return;
  }
  const QLocale loc;
  bar_->setRange(0, std::max(1, u.n_ctx));
  bar_->setValue(std::min(u.n_ctx, u.prompt_tokens()));
  QString text = tr("Context %1 / %2 tokens \u00b7 system %3 \u00b7 history %4 \u00b7 message %5 \u00b7 %6 kept for the reply")
                     .arg(loc.toString(u.prompt_tokens()), loc.toString(u.n_ctx), loc.toString(u.system_tokens),
                          loc.toString(u.history_tokens), loc.toString(u.message_tokens), loc.toString(u.reserve));
  if (u.n_dropped > 0) text += tr(" \u00b7 the oldest %n message(s) will be left out", "", u.n_dropped);
  label_->setText(text);
  // The chat view marks the model rows those dropped context messages are.
  int rows = 0, seen = 0;
  const ChatModel* model = controller_->model();
  while (rows < model->rowCount() && seen < u.n_dropped) {
    const ChatItem& it = model->item(rows);
    const bool in_context = !it.streaming && it.role != QLatin1String("error") &&
                            !(it.role == QLatin1String("assistant") && it.text.isEmpty());
    if (in_context) ++seen;
    ++rows;
  }
  view_->setDroppedRows(rows);
}

}  // namespace specchat::ui
