// Glue on the GUI thread between the views, the chat model, the conversation store and the
// engine worker: turns "send this text" into a GenerateJob, streams the reply into the model,
// saves both messages, and keeps the stats and status lines. Widgets stay thin (MainWindow
// only lays out and forwards), so a later sidebar, live panel or compare view can share it.
#pragma once

#include <QObject>
#include <QString>

#include <memory>

#include "storage/conversation_store.h"
#include "ui/chat_model.h"
#include "ui/engine_types.h"

namespace specchat::ui {

class EngineWorker;

class ChatController : public QObject {
  Q_OBJECT

 public:
  // `worker` lives on the engine thread and must outlive the controller. Opens the SQLite
  // database at `database_path` (created when missing; ":memory:" allowed) and shows its most
  // recently updated conversation, or starts a new one. A database that cannot be opened (a
  // newer schema, an unwritable directory) is reported on the status line and the chat then
  // works without saving; a corrupt file moved aside is reported too. Never throws.
  ChatController(EngineWorker* worker, const QString& database_path, QObject* parent = nullptr);
  ~ChatController() override;

  ChatModel* model() { return &model_; }
  bool isBusy() const { return current_job_ != 0; }
  bool isPersistent() const { return store_ != nullptr; }
  qint64 conversationId() const { return conversation_id_; }
  QString title() const { return title_; }
  QString statsText() const { return stats_text_; }
  QString statusText() const { return status_text_; }
  bool statusIsError() const { return status_error_; }
  const GenerationSettings& settings() const { return settings_; }
  void setSettings(const GenerationSettings& s) { settings_ = s; }

 public Q_SLOTS:
  // Appends a user message (saved at once) and asks the engine for the reply. Ignored while a
  // reply is being generated or when `text` is blank.
  void send(const QString& text);
  // Cancels the reply being generated; what it produced so far is kept and saved.
  void stop();
  // Starts an empty conversation (cancels a running reply first).
  void newConversation();

 Q_SIGNALS:
  void busyChanged(bool busy);
  void statsChanged(const QString& text);
  void statusChanged(const QString& text, bool error);
  void titleChanged(const QString& title);
  // Connected (queued) to EngineWorker::generate.
  void generateRequested(const specchat::ui::GenerateJob& job);

 private:
  void openStore(const QString& path);
  void loadConversation(const Conversation& c);
  void persist(int row, const Message& m);  // saves and records the storage id in the model
  void setBusy(quint64 job_id);
  void setStats(const QString& text);
  void setStatus(const QString& text, bool error);

  void onModelsLoading(const QString& description);
  void onModelsLoaded(const specchat::ui::ModelInfo& info);
  void onError(const QString& message);
  void onToken(quint64 job_id, const QString& text, bool drafted, int step);
  void onFinished(const specchat::ui::GenerationSummary& s);

  EngineWorker* worker_;
  ChatModel model_;
  std::unique_ptr<ConversationStore> store_;  // null when the database could not be opened
  qint64 conversation_id_ = 0;
  QString title_;
  std::string system_prompt_;
  std::string template_name_;  // of the loaded models, stored with user messages
  GenerationSettings settings_;
  quint64 next_job_id_ = 0;
  quint64 current_job_ = 0;    // 0 = idle
  int reply_row_ = -1;         // model row the current reply streams into
  QString stats_text_, status_text_;
  bool status_error_ = false;
  QString ready_text_;         // status once models are loaded
  bool engine_error_ = false;  // the status shows an engine error, cleared by the next reply
};

}  // namespace specchat::ui
