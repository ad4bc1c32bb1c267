#include "ui/storage_worker.h"

#include <QFile>
#include <QMetaObject>
#include <QSaveFile>

#include <exception>

#include "storage/export.h"

namespace specchat::ui {

namespace {

const char* const kNewTitle = "New chat";

QString what_of(const std::exception& e) { return QString::fromStdString(e.what()); }

}  // namespace

void register_storage_types() {
  qRegisterMetaType<Conversation>();
  qRegisterMetaType<Message>();
  qRegisterMetaType<std::vector<Conversation>>();
  qRegisterMetaType<std::vector<Message>>();
  qRegisterMetaType<ExportFormat>();
  qRegisterMetaType<GenerationRecord>();
}

StorageWorker::StorageWorker(QObject* parent) : QObject(parent) { register_storage_types(); }

StorageWorker::~StorageWorker() = default;

StorageOpenResult StorageWorker::open(const QString& path) {
  StorageOpenResult r;
  if (path.isEmpty()) {
    r.status = tr("Conversations are not saved: no database location.");
    r.status_is_error = true;
    return r;
  }
  try {
    store_ = std::make_unique<ConversationStore>(path.toStdString());
    if (store_->open_info().recovered_from_corrupt) {
      r.status = tr("The conversation database was damaged; it was moved to %1 and a new one started.")
                     .arg(QString::fromStdString(store_->open_info().moved_aside_to));
      r.status_is_error = true;
    }
    r.read_only = store_->read_only();
    if (r.read_only) {
      r.status = tr("The conversation history is read-only: you can read it, but nothing new will be saved "
                    "(check the permissions of %1).")
                     .arg(path);
      r.status_is_error = true;
    }
    r.conversations = store_->list_conversations();
    if (r.conversations.empty() && !r.read_only) {
      const int64_t id = store_->create_conversation(kNewTitle);
      r.conversations = store_->list_conversations();
      r.current = store_->conversation(id).value_or(Conversation{id, kNewTitle, "", 0, 0});
    } else {
      r.current = r.conversations.empty() ? Conversation{0, kNewTitle, "", 0, 0} : r.conversations.front();
    }
    if (r.current.id != 0) r.messages = store_->messages(r.current.id);
    r.ok = true;
  } catch (const std::exception& e) {
    store_.reset();
    r = StorageOpenResult{};
    r.status = tr("Conversations are not saved: %1").arg(what_of(e));
    r.status_is_error = true;
  }
  return r;
}

int64_t StorageWorker::resolve(qint64 id) const {
  if (id > 0) return id;
  const auto it = created_.find(id);
  return it == created_.end() ? 0 : it->second;
}

void StorageWorker::emitList() {
  if (!store_) return;
  try {
    Q_EMIT conversationsListed(filter_.empty() ? store_->list_conversations()
                                               : store_->search_conversations(filter_));
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not list the conversations: %1").arg(what_of(e)));
  }
}

void StorageWorker::setFilter(const QString& text) {
  filter_ = text.trimmed().toStdString();
  emitList();
}

void StorageWorker::createConversation(qint64 pending_id, const QString& title, const QString& system_prompt) {
  if (!store_) return;
  try {
    const int64_t id = store_->create_conversation(title.toStdString(), system_prompt.toStdString());
    created_[pending_id] = id;
    const Conversation fallback{id, title.toStdString(), system_prompt.toStdString(), 0, 0};
    Q_EMIT conversationCreated(pending_id, store_->conversation(id).value_or(fallback));
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not create a conversation: %1").arg(what_of(e)));
  }
  emitList();
}

void StorageWorker::loadConversation(qint64 id) {
  if (!store_) return;
  try {
    const int64_t real = resolve(id);
    const std::optional<Conversation> c = real > 0 ? store_->conversation(real) : std::nullopt;
    if (!c) {
      Q_EMIT failed(tr("Could not open the conversation: it no longer exists."));
      return;
    }
    Q_EMIT conversationLoaded(*c, store_->messages(c->id));
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not open the conversation: %1").arg(what_of(e)));
  }
}

void StorageWorker::renameConversation(qint64 id, const QString& title) {
  if (!store_) return;
  const int64_t real = resolve(id);
  try {
    if (real <= 0) throw StorageError("not_found", "the conversation was not saved");
    store_->rename_conversation(real, title.toStdString());
  } catch (const std::exception& e) {
    QString stored;
    try {
      if (const auto c = real > 0 ? store_->conversation(real) : std::nullopt) stored = QString::fromStdString(c->title);
    } catch (const std::exception&) {
      // the reason below is what matters; the title stays as the list shows it
    }
    const QString reason = what_of(e);
    Q_EMIT renameFailed(id, stored, reason);
    Q_EMIT failed(tr("Could not rename the conversation: %1").arg(reason));
  }
  emitList();
}

void StorageWorker::setSystemPrompt(qint64 id, const QString& system_prompt) {
  if (!store_) return;
  try {
    store_->set_system_prompt(resolve(id), system_prompt.toStdString());
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not save the system prompt: %1").arg(what_of(e)));
  }
}

void StorageWorker::deleteConversation(qint64 id) {
  if (!store_) return;
  try {
    const int64_t real = resolve(id);
    if (real > 0) store_->delete_conversation(real);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not delete the conversation: %1").arg(what_of(e)));
  }
  emitList();
}

void StorageWorker::addMessage(qint64 pending_id, const Message& m) {
  if (!store_) return;
  try {
    Message copy = m;
    copy.conversation_id = resolve(m.conversation_id);
    if (copy.conversation_id <= 0) throw StorageError("not_found", "its conversation was not saved");
    const int64_t id = store_->add_message(copy);
    created_[pending_id] = id;
    Q_EMIT messageSaved(pending_id, id);
  } catch (const std::exception& e) {
    Q_EMIT messageSaveFailed(pending_id, what_of(e));
  }
  emitList();  // the conversation moved to the top
}

void StorageWorker::deleteMessage(qint64 id) {
  if (!store_) return;
  try {
    const int64_t real = resolve(id);
    if (real > 0) store_->delete_message(real);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not delete the message: %1").arg(what_of(e)));
  }
}

void StorageWorker::replaceMessage(qint64 pending_id, qint64 replaced_id, const Message& m) {
  if (!store_) return;
  try {
    Message copy = m;
    copy.conversation_id = resolve(m.conversation_id);
    const int64_t replaced = resolve(replaced_id);
    if (copy.conversation_id <= 0) throw StorageError("not_found", "its conversation was not saved");
    const int64_t id = replaced > 0 ? store_->add_message_replacing(replaced, copy) : store_->add_message(copy);
    created_[pending_id] = id;
    Q_EMIT messageSaved(pending_id, id);
  } catch (const std::exception& e) {
    Q_EMIT messageSaveFailed(pending_id, what_of(e));
  }
  emitList();
}

void StorageWorker::exportConversation(qint64 id, ExportFormat format, const QString& path) {
  if (!store_) {
    Q_EMIT failed(tr("Could not export: conversations are not saved."));
    return;
  }
  try {
    const int64_t real = resolve(id);
    const std::optional<Conversation> c = real > 0 ? store_->conversation(real) : std::nullopt;
    if (!c) {
      Q_EMIT failed(tr("Could not export: the conversation no longer exists."));
      return;
    }
    const std::vector<Message> all = store_->all_messages(c->id);
    std::string text;
    switch (format) {
      case ExportFormat::markdown: text = export_markdown(*c, all); break;
      case ExportFormat::html: text = export_html(*c, all); break;
      case ExportFormat::json: text = export_json(*c, all, store_->conversation_latents(c->id)); break;
    }
    // QSaveFile: the target appears complete or not at all (an old file is never half-written).
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) ||
        f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size()) ||
        !f.commit()) {
      Q_EMIT failed(tr("Could not write %1: %2").arg(path, f.errorString()));
      return;
    }
    Q_EMIT exported(path);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not export: %1").arg(what_of(e)));
  }
}

void StorageWorker::importJson(const QString& path) {
  if (!store_) {
    Q_EMIT failed(tr("Could not import: conversations are not saved."));
    return;
  }
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) {
    Q_EMIT failed(tr("Could not read %1: %2").arg(path, f.errorString()));
    return;
  }
  const QByteArray bytes = f.readAll();
  try {
    const int64_t id = import_json(*store_, bytes.toStdString());
    std::optional<Conversation> c = store_->conversation(id);
    // Told apart from the conversation it was exported from, when that one is still here.
    if (c) {
      for (const Conversation& other : store_->list_conversations()) {
        if (other.id != id && other.title == c->title) {
          store_->rename_conversation(id, c->title + " (imported)");
          c = store_->conversation(id);
          break;
        }
      }
    }
    emitList();
    if (c) Q_EMIT imported(*c);
  } catch (const std::exception& e) {
    Q_EMIT failed(tr("Could not import %1: %2").arg(path, what_of(e)));
  }
}

StorageHost::StorageHost() : worker_(new StorageWorker) {
  thread_.setObjectName(QStringLiteral("specchat-storage"));
  worker_->moveToThread(&thread_);
  QObject::connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.start();
}

StorageHost::~StorageHost() {
  flush();
  thread_.quit();
  thread_.wait();
}

StorageOpenResult StorageHost::open(const QString& path) {
  StorageOpenResult r;
  QMetaObject::invokeMethod(
      worker_, [w = worker_, &r, path] { r = w->open(path); }, Qt::BlockingQueuedConnection);
  return r;
}

void StorageHost::flush() {
  QMetaObject::invokeMethod(worker_, &StorageWorker::flush, Qt::BlockingQueuedConnection);
}

}  // namespace specchat::ui
