#include "ui/chat_controller.h"

#include <QDateTime>
#include <QFileInfo>

#include <exception>

#include "ui/engine_worker.h"

namespace specchat::ui {

namespace {

const char* const kNewTitle = "New chat";
constexpr int kTitleChars = 48;

// First line of the first user message, shortened: the conversation's title.
QString title_from(const QString& text) {
  QString line = text.section(QLatin1Char('\n'), 0, 0).simplified();
  if (line.size() > kTitleChars) line = line.left(kTitleChars - 1) + QStringLiteral("\u2026");
  return line;
}

qint64 now_ms() { return QDateTime::currentMSecsSinceEpoch(); }

}  // namespace

ChatController::ChatController(EngineWorker* worker, const QString& database_path, QObject* parent)
    : QObject(parent), worker_(worker) {
  register_engine_types();
  connect(worker_, &EngineWorker::modelsLoading, this, &ChatController::onModelsLoading,
          Qt::QueuedConnection);
  connect(worker_, &EngineWorker::modelsLoaded, this, &ChatController::onModelsLoaded,
          Qt::QueuedConnection);
  connect(worker_, &EngineWorker::errorOccurred, this, &ChatController::onError, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::tokenGenerated, this, &ChatController::onToken, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::generationFinished, this, &ChatController::onFinished,
          Qt::QueuedConnection);
  connect(this, &ChatController::generateRequested, worker_, &EngineWorker::generate,
          Qt::QueuedConnection);
  openStore(database_path);
}

ChatController::~ChatController() {
  if (current_job_ != 0) worker_->stop(current_job_);
}

void ChatController::openStore(const QString& path) {
  title_ = QString::fromUtf8(kNewTitle);
  if (path.isEmpty()) {
    setStatus(tr("Conversations are not saved: no database location."), true);
    return;
  }
  try {
    store_ = std::make_unique<ConversationStore>(path.toStdString());
    if (store_->open_info().recovered_from_corrupt) {
      setStatus(tr("The conversation database was damaged; it was moved to %1 and a new one started.")
                    .arg(QString::fromStdString(store_->open_info().moved_aside_to)),
                true);
    }
    const std::vector<Conversation> all = store_->list_conversations();
    if (!all.empty()) {
      loadConversation(all.front());
      return;
    }
    const int64_t id = store_->create_conversation(kNewTitle);
    Conversation c;
    c.id = id;
    c.title = kNewTitle;
    loadConversation(c);
  } catch (const std::exception& e) {
    store_.reset();
    conversation_id_ = 0;
    model_.clear();
    setStatus(tr("Conversations are not saved: %1").arg(QString::fromStdString(e.what())), true);
  }
}

void ChatController::loadConversation(const Conversation& c) {
  conversation_id_ = c.id;
  system_prompt_ = c.system_prompt;
  title_ = QString::fromStdString(c.title);
  QList<ChatItem> items;
  QString last_stats;
  for (const Message& m : store_->messages(c.id)) {
    items.append(ChatModel::fromMessage(m));
    if (items.back().has_stats) last_stats = format_stats(items.back().stats);
  }
  model_.setItems(std::move(items));
  setStats(last_stats);
  Q_EMIT titleChanged(title_);
}

void ChatController::persist(int row, const Message& m) {
  if (!store_ || conversation_id_ == 0) return;
  try {
    model_.setMessageId(row, store_->add_message(m));
  } catch (const std::exception& e) {
    setStatus(tr("Could not save the message: %1").arg(QString::fromStdString(e.what())), true);
  }
}

void ChatController::send(const QString& text) {
  const QString body = text.trimmed();
  if (isBusy() || body.isEmpty()) return;

  ChatItem user;
  user.role = QStringLiteral("user");
  user.text = body;
  const int user_row = model_.append(user);
  Message m;
  m.conversation_id = conversation_id_;
  m.role = "user";
  m.text = body.toStdString();
  m.template_name = template_name_;
  m.created_ms = now_ms();
  persist(user_row, m);
  if (title_ == QLatin1String(kNewTitle)) {
    title_ = title_from(body);
    if (store_ && conversation_id_ != 0) {
      try {
        store_->rename_conversation(conversation_id_, title_.toStdString());
      } catch (const std::exception& e) {
        setStatus(tr("Could not save the title: %1").arg(QString::fromStdString(e.what())), true);
      }
    }
    Q_EMIT titleChanged(title_);
  }

  GenerateJob job;
  job.id = ++next_job_id_;
  job.conversation_id = conversation_id_;
  if (!system_prompt_.empty()) job.messages.push_back(ChatMessage{"system", system_prompt_});
  for (ChatMessage& cm : model_.chatMessages()) job.messages.push_back(std::move(cm));
  job.settings = settings_;

  ChatItem reply;
  reply.role = QStringLiteral("assistant");
  reply.streaming = true;
  reply_row_ = model_.append(reply);
  setBusy(job.id);
  setStats(tr("generating\u2026"));
  Q_EMIT generateRequested(job);
}

void ChatController::stop() {
  if (current_job_ != 0) worker_->stop(current_job_);
}

void ChatController::newConversation() {
  stop();
  setBusy(0);
  reply_row_ = -1;
  if (!store_) {
    model_.clear();
    title_ = QString::fromUtf8(kNewTitle);
    Q_EMIT titleChanged(title_);
    return;
  }
  try {
    Conversation c;
    c.id = store_->create_conversation(kNewTitle);
    c.title = kNewTitle;
    loadConversation(c);
  } catch (const std::exception& e) {
    setStatus(tr("Could not create a conversation: %1").arg(QString::fromStdString(e.what())), true);
  }
}

void ChatController::setBusy(quint64 job_id) {
  const bool was = isBusy();
  current_job_ = job_id;
  if (was != isBusy()) Q_EMIT busyChanged(isBusy());
}

void ChatController::setStats(const QString& text) {
  if (text == stats_text_) return;
  stats_text_ = text;
  Q_EMIT statsChanged(text);
}

void ChatController::setStatus(const QString& text, bool error) {
  status_text_ = text;
  status_error_ = error;
  Q_EMIT statusChanged(text, error);
}

void ChatController::onModelsLoading(const QString& description) { setStatus(description, false); }

void ChatController::onModelsLoaded(const ModelInfo& info) {
  template_name_ = info.template_name.toStdString();
  QString text = tr("Ready \u00b7 %1").arg(QFileInfo(info.target_path).fileName());
  if (!info.draft_path.isEmpty()) text += tr(" + draft %1").arg(QFileInfo(info.draft_path).fileName());
  text += tr(" \u00b7 %1 context tokens").arg(info.n_ctx);
  if (!info.warnings.isEmpty()) text += tr(" \u00b7 %n vocabulary warning(s)", "", int(info.warnings.size()));
  ready_text_ = text;
  engine_error_ = false;
  setStatus(text, false);
}

void ChatController::onError(const QString& message) {
  engine_error_ = true;
  setStatus(message, true);
}

void ChatController::onToken(quint64 job_id, const QString& text, bool drafted, int step) {
  if (job_id != current_job_ || reply_row_ < 0) return;  // a stale job's late tokens
  model_.appendToken(reply_row_, text, drafted, step);
  const ChatItem& it = model_.item(reply_row_);
  setStats(tr("generating\u2026 %1 tokens \u00b7 %2 drafted").arg(it.n_tokens).arg(it.n_drafted));
}

void ChatController::onFinished(const GenerationSummary& s) {
  if (s.job_id != current_job_ || reply_row_ < 0) return;
  const int row = reply_row_;
  reply_row_ = -1;
  setBusy(0);
  const bool cancelled = s.finish == QLatin1String("cancelled");
  if (s.finish == QLatin1String("error") || (cancelled && s.tokens.empty())) {
    // Nothing to keep: drop the reply bubble (an error goes to the status line). An empty reply
    // that ended by itself (EOS at once) is kept: it is what the model said.
    if (s.finish == QLatin1String("error")) onError(s.error);
    model_.removeAt(row);
    setStats(cancelled ? tr("stopped") : QString());
    return;
  }
  if (s.n_dropped_messages > 0) {
    setStatus(tr("The oldest %n message(s) did not fit the model's context and were left out.", "",
                 s.n_dropped_messages),
              false);
  } else if (engine_error_ && !ready_text_.isEmpty()) {
    setStatus(ready_text_, false);  // the engine works again: the old error no longer applies
  }
  engine_error_ = false;
  const MessageStats stats = to_message_stats(s.stats, s.speculative);
  model_.finishReply(row, s.text, stats, s.finish);
  setStats(format_stats(stats));

  Message m;
  m.conversation_id = conversation_id_;
  m.role = "assistant";
  m.text = s.text.toStdString();
  m.token_ids = s.tokens;
  m.drafted = s.drafted;
  m.tokenizer_hash = s.tokenizer_hash;
  m.template_name = s.template_name.toStdString();
  m.stats = stats;
  m.created_ms = now_ms();
  persist(row, m);
}

}  // namespace specchat::ui
