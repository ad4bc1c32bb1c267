#include "ui/chat_controller.h"

#include <QDateTime>
#include <QFileInfo>
#include <QMetaObject>

#include <exception>
#include <functional>

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

// A loader's exception text made readable: an allocation failure says so in words.
QString readable_error(const QString& message) {
  if (message.contains(QLatin1String("bad_alloc")) || message.contains(QLatin1String("out of memory"))) {
    return ChatController::tr("Out of memory: the model does not fit in this machine's memory (%1). "
                              "Choose a smaller model in Settings.")
        .arg(message);
  }
  return message;
}

}  // namespace

ChatController::ChatController(EngineWorker* worker, const QString& database_path, QObject* parent)
    : QObject(parent), worker_(worker) {
  register_engine_types();
  register_storage_types();
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
  connect(worker_, &EngineWorker::serverStateChanged, this, &ChatController::serverStateChanged,
          Qt::QueuedConnection);
  connect(worker_, &EngineWorker::pipoStatusChanged, this, &ChatController::onPipoStatus, Qt::QueuedConnection);
  connect(worker_, &EngineWorker::pipoNote, this, &ChatController::onPipoNote, Qt::QueuedConnection);

  StorageWorker* sw = storage_.worker();
  connect(sw, &StorageWorker::conversationsListed, &conversations_,
          &ConversationListModel::setConversations, Qt::QueuedConnection);
  connect(sw, &StorageWorker::conversationsListed, this, &ChatController::onListed, Qt::QueuedConnection);
  connect(sw, &StorageWorker::messageSaveFailed, this, &ChatController::onMessageSaveFailed, Qt::QueuedConnection);
  connect(sw, &StorageWorker::renameFailed, this, &ChatController::onRenameFailed, Qt::QueuedConnection);
  connect(sw, &StorageWorker::pipoHistoryResolved, this, &ChatController::onPipoHistory, Qt::QueuedConnection);
  connect(sw, &StorageWorker::alternativesLoaded, this,
          [this](qint64 conversation_id, const QHash<qint64, QList<qint64>>& alternatives) {
            const qint64 real = conversation_id < 0 ? created_ids_.value(conversation_id, 0) : conversation_id;
            if (loading_id_ != 0 || (conversation_id != conversation_id_ && real != conversation_id_))
              return;  // another conversation, or a path that is being replaced
            alternatives_ = alternatives;
            applyAlternatives();
          },
          Qt::QueuedConnection);
  connect(sw, &StorageWorker::lastGeneration, this,
          [this](qint64 id, bool found, const GenerationRecord& g) {
            if (id != conversation_id_ || isBusy()) return;  // another conversation, or a newer reply
            Q_EMIT lastReplyStats(found, found ? live_stats_from_record(g) : LiveStats{});
          },
          Qt::QueuedConnection);
  connect(sw, &StorageWorker::conversationCreated, this, &ChatController::onConversationCreated,
          Qt::QueuedConnection);
  connect(sw, &StorageWorker::conversationLoaded, this, &ChatController::onConversationLoaded,
          Qt::QueuedConnection);
  connect(sw, &StorageWorker::messageSaved, this, &ChatController::onMessageSaved, Qt::QueuedConnection);
  connect(sw, &StorageWorker::exported, this, &ChatController::exported, Qt::QueuedConnection);
  connect(sw, &StorageWorker::compareSaved, this,
          [this](qint64 id) { setStatus(tr("Comparison saved (run %1).").arg(id), false); }, Qt::QueuedConnection);
  connect(sw, &StorageWorker::imported, this,
          [this](const Conversation& c) {
            openConversation(c.id);
            setStatus(tr("Imported \u201c%1\u201d.").arg(QString::fromStdString(c.title)), false);
            Q_EMIT imported(c.id);
          },
          Qt::QueuedConnection);
  connect(sw, &StorageWorker::failed, this, [this](const QString& what) { setStatus(what, true); },
          Qt::QueuedConnection);
  connect(&conversations_, &ConversationListModel::renameRequested, this,
          &ChatController::renameConversation);

  undo_timer_.setSingleShot(true);
  undo_timer_.setInterval(kUndoMs);
  connect(&undo_timer_, &QTimer::timeout, this, &ChatController::commitPendingDelete);

  title_ = QString::fromUtf8(kNewTitle);
  applyOpen(storage_.open(database_path));
}

ChatController::~ChatController() {
  if (current_job_ != 0) worker_->stop(current_job_);
  commitPendingDelete();
  // storage_'s destructor waits for the queued writes.
}

void ChatController::applyOpen(const StorageOpenResult& r) {
  persistent_ = r.ok;
  read_only_ = r.ok && r.read_only;
  // Kept for the whole session: the "Ready" line after a model load must not hide that
  // conversations are not being saved, or that a corrupt file was moved aside.
  storage_notice_ = r.status;
  storage_notice_is_error_ = r.status_is_error || !r.ok;
  if (!r.ok && storage_notice_.isEmpty()) storage_notice_ = tr("Conversations are not saved.");
  if (!storage_notice_.isEmpty()) setStatus(storage_notice_, storage_notice_is_error_);
  if (!r.ok) return;
  conversations_.setConversations(r.conversations);
  showConversation(r.current, r.messages);
}

void ChatController::showConversation(const Conversation& c, const std::vector<Message>& messages) {
  if (context_notice_ && !ready_text_.isEmpty()) {
    setStatus(ready_text_, storage_notice_is_error_);  // the notice was about the other conversation
  }
  context_notice_ = false;
  conversation_id_ = c.id;
  loading_id_ = 0;
  error_row_ = -1;
  replaced_.reset();
  system_prompt_ = QString::fromStdString(c.system_prompt);
  QList<ChatItem> items;
  QString last_stats;
  for (const Message& m : messages) {
    items.append(ChatModel::fromMessage(m));
    if (items.back().has_stats) last_stats = format_stats(items.back().stats);
  }
  model_.setItems(std::move(items));
  setStats(last_stats);
  setTitle(QString::fromStdString(c.title));
  Q_EMIT systemPromptChanged(system_prompt_);
  Q_EMIT conversationChanged(conversation_id_);
  alternatives_.clear();
  requestAlternatives();
  if (persistent_ && conversation_id_ > 0) {
    post([id = conversation_id_](StorageWorker* w) { w->loadLastGeneration(id); });
  } else {
    Q_EMIT lastReplyStats(false, LiveStats{});
  }
}

void ChatController::post(std::function<void(StorageWorker*)> request) {
  StorageWorker* w = storage_.worker();
  QMetaObject::invokeMethod(w, [w, request = std::move(request)] { request(w); }, Qt::QueuedConnection);
}

qint64 ChatController::save(int row, const Message& m, qint64 replaced_id) {
  if (read_only_) {
    model_.setSaveError(row, tr("the conversation history is read-only"));
    return 0;
  }
  if (!persistent_ || conversation_id_ == 0) return 0;
  const qint64 pending = nextPending();
  model_.setMessageId(row, pending);
  if (replaced_id != 0) {
    post([a0 = pending, a1 = replaced_id, a2 = m](StorageWorker* w) { w->replaceMessage(a0, a1, a2); });
  } else {
    post([a0 = pending, a1 = m](StorageWorker* w) { w->addMessage(a0, a1); });
  }
  return pending;
}

std::vector<ContextMessage> ChatController::contextMessages() const {
  std::vector<ContextMessage> out;
  if (!system_prompt_.trimmed().isEmpty()) {
    out.push_back(ContextMessage{ChatMessage{"system", system_prompt_.toStdString()}, {}, 0, {}});
  }
  for (ContextMessage& cm : model_.contextMessages()) out.push_back(std::move(cm));
  return out;
}

QString ChatController::messageText(int row) const {
  return row >= 0 && row < model_.rowCount() ? model_.item(row).text : QString();
}

void ChatController::clearErrorRow() {
  if (error_row_ >= 0 && error_row_ < model_.rowCount() && model_.item(error_row_).role == QLatin1String("error")) {
    model_.removeAt(error_row_);
  }
  error_row_ = -1;
}

void ChatController::send(const QString& text) {
  const QString body = text.trimmed();
  if (isBusy() || loading_id_ != 0 || body.isEmpty()) return;
  clearErrorRow();

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
  save(user_row, m);
  if (title_ == QLatin1String(kNewTitle)) {
    setTitle(title_from(body));
    if (persistent_ && conversation_id_ != 0) {
      post([a0 = conversation_id_, a1 = title_](StorageWorker* w) { w->renameConversation(a0, a1); });
    }
  }
  startReply();
}

void ChatController::startReply() {
  GenerateJob job;
  job.id = ++next_job_id_;
  job.conversation_id = conversation_id_;
  // The system prompt goes first: it frames every turn (ChatMessage order = context order).
  // The same turns with each reply's stored ids: the engine reuses them (and the KV prefix).
  job.context = contextMessages();
  for (const ContextMessage& cm : job.context) job.messages.push_back(cm.message);
  job.settings = request_settings(settings_);  // a fresh seed per reply unless pinned
  job_settings_ = job.settings;

  ChatItem reply;
  reply.role = QStringLiteral("assistant");
  reply.streaming = true;
  reply_row_ = model_.append(reply);
  setBusy(job.id);
  setStats(tr("generating\u2026"));
  job_pipo_ = job.settings.pipo.enabled && remote_url_.isEmpty();
  if (!engine_error_ || models_loaded_) setStatus(generatingText(), false);
  dispatch(std::move(job), pipoEntries());
}

void ChatController::regenerate() {
  if (isBusy() || loading_id_ != 0) return;
  clearErrorRow();
  const int last = model_.rowCount() - 1;
  if (last < 0) return;
  const ChatItem& it = model_.item(last);
  if (it.role == QLatin1String("assistant")) {
    replaced_ = it;
    model_.removeAt(last);
  } else if (it.role != QLatin1String("user")) {
    return;
  }
  startReply();
}

void ChatController::stop() {
  if (current_job_ != 0) worker_->stop(current_job_);
}

void ChatController::abandonReply() {
  // The reply being generated belongs to the conversation being left: it is stopped, and what
  // it produced is still saved there when the engine reports the end (onFinished).
  if (current_job_ != 0 && persistent_ && conversation_id_ != 0) {
    abandoned_ = Abandoned{current_job_, conversation_id_, replaced_ ? replaced_->id : 0, continued_};
  }
  stop();
  const bool was_busy = isBusy();
  setBusy(0);
  reply_row_ = -1;
  replaced_.reset();
  continued_.reset();
  if (was_busy && status_text_ == generatingText()) restoreReadyStatus();
}

void ChatController::newConversation() {
  if (!isBusy() && loading_id_ == 0 && model_.rowCount() == 0 && title_ == QLatin1String(kNewTitle) &&
      system_prompt_.isEmpty()) {
    return;  // the open conversation is still empty: reuse it
  }
  abandonReply();
  if (context_notice_ && !ready_text_.isEmpty()) setStatus(ready_text_, storage_notice_is_error_);
  context_notice_ = false;
  Conversation c;
  c.title = kNewTitle;
  if (persistent_) {
    c.id = nextPending();
    post([id = c.id](StorageWorker* w) { w->createConversation(id, QString::fromUtf8(kNewTitle), QString()); });
  }
  showConversation(c, {});
}

void ChatController::openConversation(qint64 id) {
  if (!persistent_ || id == 0 || (id == conversation_id_ && loading_id_ == 0)) return;
  abandonReply();
  loading_id_ = id;
  conversation_id_ = id;
  model_.clear();
  post([a0 = id](StorageWorker* w) { w->loadConversation(a0); });
}

void ChatController::renameConversation(qint64 id, const QString& title) {
  const QString t = title.simplified();
  if (t.isEmpty()) return;
  if (read_only_) {
    setStatus(tr("Could not rename the conversation: the conversation history is read-only."), true);
    // Title and list keep the stored name (an edit in the list shows the new one at once).
    post([f = search_](StorageWorker* w) { w->setFilter(f); });
    return;
  }
  if (id == conversation_id_) setTitle(t);
  if (!persistent_) return;
  post([a0 = id, a1 = t](StorageWorker* w) { w->renameConversation(a0, a1); });
}

void ChatController::setSystemPrompt(const QString& text) {
  if (text == system_prompt_) return;
  system_prompt_ = text;
  Q_EMIT systemPromptChanged(text);
  if (!persistent_ || conversation_id_ == 0) return;
  post([a0 = conversation_id_, a1 = text](StorageWorker* w) { w->setSystemPrompt(a0, a1); });
}

void ChatController::deleteConversation(qint64 id) {
  if (!persistent_ || id == 0) return;
  commitPendingDelete();
  const int row = conversations_.rowOf(id);
  const QString title = id == conversation_id_ ? title_ : conversations_.titleAt(row);
  pending_delete_ = id;
  conversations_.setHidden(id, true);
  undo_timer_.start();
  if (id == conversation_id_) {
    const qint64 next = conversations_.idAt(0);
    if (next != 0) {
      openConversation(next);
    } else {
      newConversation();
    }
  }
  Q_EMIT deletePending(title);
}

void ChatController::undoDelete() {
  if (pending_delete_ == 0) return;
  undo_timer_.stop();
  const qint64 id = pending_delete_;
  pending_delete_ = 0;
  conversations_.setHidden(id, false);
  Q_EMIT deleteSettled();
  openConversation(id);
}

void ChatController::commitPendingDelete() {
  if (pending_delete_ == 0) return;
  undo_timer_.stop();
  const qint64 id = pending_delete_;
  pending_delete_ = 0;
  post([a0 = id](StorageWorker* w) { w->deleteConversation(a0); });
  Q_EMIT deleteSettled();
}

void ChatController::setSearch(const QString& text) {
  search_ = text.trimmed();
  Q_EMIT searchChanged(search_);
  if (!persistent_) return;
  post([a0 = text](StorageWorker* w) { w->setFilter(a0); });
}

void ChatController::exportConversation(ExportFormat format, const QString& path) {
  if (!persistent_) {
    setStatus(tr("Could not export: conversations are not saved."), true);
    return;
  }
  post([a0 = conversation_id_, a1 = format, a2 = path](StorageWorker* w) { w->exportConversation(a0, a1, a2); });
}

void ChatController::importJson(const QString& path) {
  if (!persistent_) {
    setStatus(tr("Could not import: conversations are not saved."), true);
    return;
  }
  post([a0 = path](StorageWorker* w) { w->importJson(a0); });
}

void ChatController::loadModels(const QString& target, const QString& draft) {
  models_loaded_ = false;
  QMetaObject::invokeMethod(
      worker_, [w = worker_, target, draft] { w->loadModels(target, draft); }, Qt::QueuedConnection);
}

void ChatController::onConversationCreated(qint64 pending_id, const Conversation& c) {
  if (pending_delete_ == pending_id) {
    pending_delete_ = c.id;
    conversations_.setHidden(c.id, true);
  }
  created_ids_.insert(pending_id, c.id);
  if (conversation_id_ == pending_id) {
    conversation_id_ = c.id;
    Q_EMIT conversationChanged(conversation_id_);
  }
  if (loading_id_ == pending_id) loading_id_ = c.id;
}

void ChatController::onConversationLoaded(const Conversation& c, const std::vector<Message>& messages) {
  if (loading_id_ == 0 || c.id != loading_id_) return;  // superseded by another request
  showConversation(c, messages);
}

void ChatController::onMessageSaved(qint64 pending_id, qint64 id) {
  for (int row = 0; row < model_.rowCount(); ++row) {
    if (model_.item(row).id == pending_id) {
      model_.setMessageId(row, id);
      requestAlternatives();  // a regenerated reply or an edited message: "‹ n/n ›"
      break;
    }
  }
  if (replaced_ && replaced_->id == pending_id) replaced_->id = id;
}

void ChatController::onMessageSaveFailed(qint64 pending_id, const QString& reason) {
  for (int row = 0; row < model_.rowCount(); ++row) {
    if (model_.item(row).id == pending_id) {
      model_.setMessageId(row, 0);
      model_.setSaveError(row, reason);
      break;
    }
  }
  if (replaced_ && replaced_->id == pending_id) replaced_->id = 0;
  setStatus(tr("A message could not be saved: %1").arg(reason), true);
}

void ChatController::onRenameFailed(qint64 id, const QString& stored_title, const QString& reason) {
  Q_UNUSED(reason);  // StorageWorker::failed reports it on the status line
  const qint64 real = id < 0 ? created_ids_.value(id, 0) : id;
  if (id == conversation_id_ || (real != 0 && real == conversation_id_)) {
    setTitle(stored_title.isEmpty() ? QString::fromUtf8(kNewTitle) : stored_title);
  }
}

void ChatController::onListed(const std::vector<Conversation>& list) {
  if (search_.isEmpty() || list.empty() || loading_id_ != 0) return;
  for (const Conversation& c : list) {
    if (c.id == conversation_id_) return;  // the open one matches: keep it
  }
  openConversation(list.front().id);  // the open one is filtered out: show the best match
}

QString ChatController::generatingText() const {
  if (!remote_url_.isEmpty()) return tr("Generating a reply on %1\u2026").arg(remote_url_);
  return job_pipo_ ? tr("Generating a PIPO reply (%1)\u2026").arg(QString::fromUtf8(kPipoLabel)) : tr("Generating a reply\u2026");
}

void ChatController::restoreReadyStatus() {
  if (!ready_text_.isEmpty()) {
    setStatus(ready_text_, storage_notice_is_error_);
  } else {
    setStatus(storage_notice_, storage_notice_is_error_);
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
  context_notice_ = false;  // whoever sets the status next replaces the notice
  status_text_ = text;
  status_error_ = error;
  Q_EMIT statusChanged(text, error);
}

void ChatController::setTitle(const QString& title) {
  title_ = title;
  Q_EMIT titleChanged(title_);
}

void ChatController::onError(const QString& message) {
  engine_error_ = true;
  setStatus(readable_error(message), true);
}

void ChatController::onToken(quint64 job_id, const QString& text, bool drafted, int step) {
  if (job_id != current_job_ || reply_row_ < 0) return;  // a stale job's late tokens
  model_.appendToken(reply_row_, text, drafted, step);
  const ChatItem& it = model_.item(reply_row_);
  // Accepted draft tokens, as the live panel's "accepted" (its "proposed" counts what was drafted).
  setStats(tr("generating\u2026 %1 tokens \u00b7 %2 from accepted drafts").arg(it.n_tokens).arg(it.n_drafted));
}

Message ChatController::replyMessage(const GenerationSummary& s, qint64 conversation_id) const {
  Message m;
  m.conversation_id = conversation_id;
  m.role = "assistant";
  m.text = s.text.toStdString();
  m.token_ids = s.tokens;
  m.drafted = s.drafted;
  m.tokenizer_hash = s.tokenizer_hash;
  m.template_name = s.template_name.toStdString();
  m.stats = to_message_stats(s);
  m.finish = s.finish.toStdString();
  if (!is_finish_reason(m.finish)) m.finish.clear();
  m.created_ms = now_ms();
  return m;
}

void ChatController::onFinished(const GenerationSummary& reply) {
  if (abandoned_.job != 0 && reply.job_id == abandoned_.job) {
    const Abandoned a = abandoned_;
    abandoned_ = Abandoned{};
    // (A server's reply has text but no ids.)
    if (reply.finish == QLatin1String("error") || (reply.tokens.empty() && reply.text.isEmpty())) return;
    const Message m = replyMessage(a.continued ? joinContinued(*a.continued, reply) : reply, a.conversation);
    const qint64 pending = nextPending();
    if (a.replaced_id != 0) {
      post([pending, r = a.replaced_id, m](StorageWorker* w) { w->replaceMessage(pending, r, m); });
    } else {
      post([pending, m](StorageWorker* w) { w->addMessage(pending, m); });
    }
    postLatents(pending, reply);
    return;
  }
  if (reply.job_id != current_job_ || reply_row_ < 0) return;
  // A continued reply is stored whole: what it had, then what came now.
  const GenerationSummary s = continued_ ? joinContinued(*continued_, reply) : reply;
  continued_.reset();
  const int row = reply_row_;
  reply_row_ = -1;
  setBusy(0);
  const bool generating_shown = status_text_ == generatingText();
  const bool cancelled = s.finish == QLatin1String("cancelled");
  const bool failed = s.finish == QLatin1String("error");
  if (failed || (cancelled && reply.tokens.empty() && reply.text.isEmpty())) {
    // Nothing to keep: drop the reply bubble; a replaced reply comes back. An error also shows
    // inline (a bubble outside the context, removed by the next action) and on the status
    // line. An empty reply that ended by itself (EOS at once) is kept: it is what the model said.
    model_.removeAt(row);
    if (replaced_) model_.append(*replaced_);
    replaced_.reset();
    if (failed) {
      const QString message = readable_error(s.error);
      onError(message);
      ChatItem err;
      err.role = QStringLiteral("error");
      err.text = tr("\u26a0 No reply: %1").arg(message);
      err.finish = QStringLiteral("error");
      error_row_ = model_.append(err);
    }
    setStats(cancelled ? tr("stopped") : QString());
    if (!failed && generating_shown) restoreReadyStatus();
    return;
  }
  if (s.n_dropped_messages > 0) {
    setStatus(tr("The oldest %n message(s) did not fit the model's context and were left out.", "",
                 s.n_dropped_messages),
              false);
    context_notice_ = true;
  } else if ((engine_error_ || generating_shown) && !ready_text_.isEmpty()) {
    // The engine works again: the old error no longer applies (a storage problem still does).
    setStatus(ready_text_, storage_notice_is_error_);
  }
  engine_error_ = false;
  const MessageStats stats = to_message_stats(s);
  model_.finishReply(row, s.text, stats, s.finish);
  model_.setReplyTokens(row, s.tokens, s.tokenizer_hash, s.template_name);
  setStats(format_stats(stats));

  const Message m = replyMessage(s, conversation_id_);
  const qint64 replaced_id = replaced_ ? replaced_->id : 0;
  replaced_.reset();
  const qint64 pending = save(row, m, replaced_id);
  if (pending != 0) {
    post([pending, g = to_generation_record(s, job_settings_)](StorageWorker* w) { w->recordGeneration(pending, g); });
  }
  finishPipo(row, pending, s);
}

void ChatController::saveCompareRun(const CompareRecord& record) {
  if (!persistent_) {
    setStatus(tr("Comparison not saved: conversations are not being saved."), true);
    return;
  }
  post([record](StorageWorker* w) { w->saveCompareRun(record); });
}

}  // namespace specchat::ui
