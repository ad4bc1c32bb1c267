// Glue on the GUI thread between the views, the chat model, the conversation list, the storage
// worker and the engine worker: turns "send this text" into a GenerateJob, streams the reply
// into the model, queues both messages for saving on the storage thread, and keeps the stats
// and status lines. Widgets stay thin (MainWindow only lays out and forwards), so the sidebar,
// live panel and compare view share it.
//
// Storage runs on its own thread (StorageWorker): the controller never waits for SQLite except
// once, when it opens the database at startup. Rows it has asked to save carry a negative
// pending id until the worker reports the real one (storage_worker.h).
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QTimer>

#include <functional>
#include <map>
#include <optional>

#include "storage/conversation_store.h"
#include "ui/chat_model.h"
#include "ui/conversation_list_model.h"
#include "ui/engine_types.h"
#include "ui/storage_worker.h"

namespace specchat::ui {

class EngineWorker;

class ChatController : public QObject {
  Q_OBJECT

 public:
  // How long a deleted conversation can be restored with undoDelete() before it is deleted
  // from the database.
  static constexpr int kUndoMs = 10000;

  // `worker` lives on the engine thread and must outlive the controller. Opens the SQLite
  // database at `database_path` on the storage thread (created when missing; ":memory:"
  // allowed) and shows its most recently updated conversation, or starts a new one. A database
  // that cannot be opened (a newer schema, an unwritable directory) is reported on the status
  // line and the chat then works without saving; a corrupt file moved aside is reported too.
  // Never throws.
  ChatController(EngineWorker* worker, const QString& database_path, QObject* parent = nullptr);
  // Deletes a conversation still waiting in its undo window, and waits for queued writes.
  ~ChatController() override;

  ChatModel* model() { return &model_; }
  ConversationListModel* conversations() { return &conversations_; }
  bool isBusy() const { return current_job_ != 0; }
  bool isPersistent() const { return persistent_; }
  // The database opened read-only: conversations can be read, nothing new is saved (each
  // message then says so).
  bool isReadOnly() const { return read_only_; }
  // The text the conversation list is filtered by (setSearch); empty = none.
  QString searchText() const { return search_; }
  // Storage id of the open conversation: > 0 saved, < 0 pending creation, 0 unsaved.
  qint64 conversationId() const { return conversation_id_; }
  QString title() const { return title_; }
  QString systemPrompt() const { return system_prompt_; }
  QString statsText() const { return stats_text_; }
  QString statusText() const { return status_text_; }
  bool statusIsError() const { return status_error_; }
  bool modelsLoaded() const { return models_loaded_; }
  const GenerationSettings& settings() const { return settings_; }
  // The settings of the next requests. A changed PIPO choice (s.pipo) goes to the engine at once
  // (EngineWorker::setPipo: the release unit is loaded or freed, pipoStatusChanged follows).
  void setSettings(const GenerationSettings& s);
  // What the engine last said about PIPO (which parts loaded, or why not).
  const PipoStatus& pipoStatus() const { return pipo_status_; }
  // The conversation whose deletion waits for its undo window; 0 when none.
  qint64 pendingDeleteId() const { return pending_delete_; }
  // The context of the next request without its new user turn: the system prompt first (when
  // set), then the conversation's turns with each reply's stored token ids.
  std::vector<ContextMessage> contextMessages() const;
  // Whether the last message is a reply that stopped short (finish "length" or "cancelled")
  // and can be continued.
  bool canContinue() const;
  // Text of chat row `row` (for Copy); empty when out of range.
  QString messageText(int row) const;
  // Waits until every queued database write has run (tests, export of what was just sent).
  void flushStorage() { storage_.flush(); }
  // The storage thread's worker, for views that keep records of their own (the Benchmark view);
  // call its slots through queued invocations only.
  StorageWorker* storageWorker() const { return storage_.worker(); }

 public Q_SLOTS:
  // Appends a user message (saved at once) and asks the engine for the reply. Ignored while a
  // reply is being generated, while a conversation is loading, or when `text` is blank.
  void send(const QString& text);
  // Cancels the reply being generated; what it produced so far is kept and saved.
  void stop();
  // Generates the last reply again. The old reply stays in the database as an inactive branch
  // (add_message_replacing) and comes back in the view when the new one fails. When the last
  // message is the user's (its reply failed), generates the missing reply.
  void regenerate();
  // Edit and resend: user message `row` becomes `text` on a new branch. The old message and
  // everything after it stay in the database as an inactive branch (add_message_replacing); the
  // view shows the path up to the new message and a reply is generated for it. Ignored while
  // busy, for a row that is not the user's, or for blank text.
  void editMessage(int row, const QString& text);
  // Deletes message `row` from the view and the database (delete_message); the rest of the
  // path stays; the stored path is shown again (where nothing followed it, another alternative
  // takes its place with its branch). Ignored while busy.
  void deleteMessage(int row);
  // Continues the last reply where it stopped (max tokens reached, or stopped by the user): the
  // engine resumes inside that reply's open turn from its stored ids (build_chat_context), the
  // new tokens stream onto it, and the whole reply is stored as a new alternative of the cut
  // one (the cut one stays, "‹ 1/2 ›"). Ignored while busy or loading, or when canContinue()
  // is false; with a remote engine the status line explains that a server cannot resume it.
  void continueReply();
  // Shows the previous (`delta` -1) or next (+1) alternative of message `row` (a regenerated or
  // continued reply, or another version of an edited message) with the turns that followed it
  // there, and makes that branch the active path (stored: it is what opens after a restart, and
  // what the next context is built from). Ignored while busy or loading, or when the row has no
  // alternative that way.
  void showAlternative(int row, int delta);
  // Starts an empty conversation (stops a running reply first, saving it like openConversation).
  // When the open conversation is already empty (no messages, untitled, no system prompt) it is
  // reused instead of adding another empty one to the list.
  void newConversation();
  // Shows conversation `id` (its active messages and system prompt). A running reply is
  // stopped; what it produced is saved to the conversation it belongs to.
  void openConversation(qint64 id);
  void renameConversation(qint64 id, const QString& title);
  // Sets the open conversation's system prompt: the first message of every later context.
  void setSystemPrompt(const QString& text);
  // Hides `id` from the list and deletes it after kUndoMs unless undoDelete() comes first (one
  // pending deletion at a time: a second commits the first). Opens another conversation when
  // `id` was open.
  void deleteConversation(qint64 id);
  void undoDelete();
  void commitPendingDelete();
  // Filters the conversation list by text (search_conversations); empty shows all. When the
  // open conversation is filtered out, the first match opens; searchChanged tells the chat view
  // what to highlight.
  void setSearch(const QString& text);
  // Writes the open conversation to `path`; exported or statusChanged(error) follows.
  void exportConversation(specchat::ui::ExportFormat format, const QString& path);
  // Imports a JSON export as a new conversation and opens it.
  void importJson(const QString& path);
  // Where replies come from: the local engine, or an OpenAI-compatible server (EngineWorker::
  // setRemote; the key falls back to $SPECCHAT_API_KEY). The status line says which.
  void setRemote(const specchat::ui::RemoteEngine& r);
  // The chat template the next loadModels uses ("" = the model file's; EngineWorker::
  // setChatTemplate).
  void setChatTemplate(const QString& name);
  // The KV type and activation rounding the next model load uses (EngineWorker::setCompute).
  void setCompute(const QString& kv_type, const QString& activations);
  // Settings › Server: queues EngineWorker::setServer (an empty key falls back to
  // $SPECCHAT_API_KEY); serverStateChanged follows.
  void setServer(const specchat::ui::ServerSettings& s);
  // Queues EngineWorker::loadModels (empty target = bundled; empty draft = none).
  void loadModels(const QString& target, const QString& draft);
  // Saves a compare-view result to the database (compare_runs); the status line reports it.
  void saveCompareRun(const specchat::CompareRecord& record);

 Q_SIGNALS:
  void busyChanged(bool busy);
  void statsChanged(const QString& text);
  void statusChanged(const QString& text, bool error);
  void titleChanged(const QString& title);
  // The open conversation changed (another one, or its pending id became a real id).
  void conversationChanged(qint64 id);
  void systemPromptChanged(const QString& text);
  void deletePending(const QString& title);  // undo window opened
  void deleteSettled();                      // undone or committed
  void exported(const QString& path);
  void imported(qint64 id);
  // The app's server started (with its URL), stopped, or could not start (EngineWorker).
  void serverStateChanged(const specchat::ui::ServerState& state);
  void searchChanged(const QString& text);
  // The open conversation's last reply as the live panel shows it (from its stored generation
  // record), or none (`found` false): sent after a conversation is shown.
  void lastReplyStats(bool found, const specchat::ui::LiveStats& stats);
  // Connected (queued) to EngineWorker::generate.
  void generateRequested(const specchat::ui::GenerateJob& job);
  // PIPO's state changed (EngineWorker::pipoStatusChanged, forwarded).
  void pipoStatusChanged(const specchat::ui::PipoStatus& status);

 private:
  void applyOpen(const StorageOpenResult& r);
  void showConversation(const Conversation& c, const std::vector<Message>& messages);
  // Queues `request` to run on the storage thread (requests run in the order posted).
  void post(std::function<void(StorageWorker*)> request);
  qint64 save(int row, const Message& m, qint64 replaced_id = 0);  // returns the pending id
  qint64 nextPending() { return --last_pending_; }
  void startReply();
  // PIPO (chat_controller_pipo.cpp). dispatch: sends `job` to the engine; a PIPO job (local
  // engine, settings.pipo.enabled) first gets its latent history from the storage thread
  // (`entries`: the context's replies, path order), which onPipoHistory then hands on.
  void dispatch(GenerateJob job, std::vector<PipoHistoryEntry> entries);
  // The context's assistant replies as the history lookup takes them (same rows as
  // ChatModel::contextMessages).
  std::vector<PipoHistoryEntry> pipoEntries() const;
  void onPipoHistory(quint64 job_id, const specchat::ui::PipoHistory& h);
  void onPipoStatus(const specchat::ui::PipoStatus& st);
  void onPipoNote(quint64 job_id, const QString& note);
  // After reply `row` (saved as `pending`, 0 = not saved) finished: stores a PIPO reply's latents
  // (in memory and in the database) and shows the reply's notice.
  void finishPipo(int row, qint64 pending, const specchat::ui::GenerationSummary& s);
  // Queues set_message_latents for a PIPO reply saved as `pending`.
  void postLatents(qint64 pending, const specchat::ui::GenerationSummary& s);
  // The status line's "Ready" text: the models' line, then PIPO's (format_pipo_status).
  void updateReadyText();
  // `s` (a continuation's summary) joined onto the reply it continued: its text, ids and
  // draft flags follow `prefix`'s. Ids of another tokenizer or template are not joined (the
  // stored reply then has none: the next context encodes its text).
  static specchat::ui::GenerationSummary joinContinued(const ChatItem& prefix, const specchat::ui::GenerationSummary& s);
  // The stored form of a finished reply.
  Message replyMessage(const specchat::ui::GenerationSummary& s, qint64 conversation_id) const;
  void clearErrorRow();
  void abandonReply();
  void setBusy(quint64 job_id);
  void setStats(const QString& text);
  void setStatus(const QString& text, bool error);
  void setTitle(const QString& title);

  void onModelsLoading(const QString& description);
  void onModelsLoaded(const specchat::ui::ModelInfo& info);
  void onError(const QString& message);
  void onToken(quint64 job_id, const QString& text, bool drafted, int step);
  void onFinished(const specchat::ui::GenerationSummary& s);
  void onConversationCreated(qint64 pending_id, const specchat::Conversation& c);
  void onConversationLoaded(const specchat::Conversation& c, const std::vector<specchat::Message>& messages);
  void onMessageSaved(qint64 pending_id, qint64 id);
  void onMessageSaveFailed(qint64 pending_id, const QString& reason);
  void onRenameFailed(qint64 id, const QString& stored_title, const QString& reason);
  void requestAlternatives();  // for the shown path, when its conversation is stored
  // Applies alternatives_ to the rows of the view ("‹ i/n ›").
  void applyAlternatives();
  void onListed(const std::vector<specchat::Conversation>& list);
  // The status line after a reply: the models' "Ready" line (with any storage notice).
  void restoreReadyStatus();
  QString generatingText() const;

  EngineWorker* worker_;
  ChatModel model_;
  ConversationListModel conversations_;
  StorageHost storage_;
  bool persistent_ = false;
  bool read_only_ = false;
  QString search_;
  QHash<qint64, qint64> created_ids_;  // pending conversation id -> real id
  // Alternatives of the shown path's messages (storage ids, insertion order), by message id;
  // only messages that have some (ConversationStore::path_alternatives).
  QHash<qint64, QList<qint64>> alternatives_;
  qint64 conversation_id_ = 0;
  qint64 loading_id_ = 0;        // conversation requested, not yet loaded
  qint64 last_pending_ = 0;      // pending ids count down from -1
  QString title_;
  QString system_prompt_;
  std::string template_name_;    // of the loaded models, stored with user messages
  GenerationSettings settings_;
  GenerationSettings job_settings_;  // what the running reply was asked with (its seed included)
  quint64 next_job_id_ = 0;
  quint64 current_job_ = 0;      // 0 = idle
  int reply_row_ = -1;           // model row the current reply streams into
  int error_row_ = -1;           // inline error bubble, removed by the next action
  std::optional<ChatItem> replaced_;  // regenerate: the reply being replaced
  std::optional<ChatItem> continued_;  // continueReply: the reply as it stood (also replaced_)
  // A reply left running when the user switched conversation: saved to its own conversation.
  struct Abandoned {
    quint64 job = 0;
    qint64 conversation = 0;
    qint64 replaced_id = 0;
    std::optional<ChatItem> continued;  // the reply it continues, if any
  };
  Abandoned abandoned_;
  qint64 pending_delete_ = 0;
  QTimer undo_timer_;
  QString stats_text_, status_text_;
  bool status_error_ = false;
  bool models_loaded_ = false;
  QString ready_text_;           // status once models are loaded
  QString models_ready_text_;    // the models' part of ready_text_
  PipoStatus pipo_status_;       // EngineWorker::pipoStatusChanged
  std::map<quint64, GenerateJob> pipo_waiting_;  // PIPO jobs waiting for their latent history
  bool job_pipo_ = false;        // the current (or last) job is a PIPO reply
  QString reply_notice_;         // a mode switch note for the current lossless reply ("" = none)
  QString remote_url_;           // replies come from this server (empty = the local engine)
  QString storage_notice_;       // what opening the database found (unsaved chat, file moved aside)
  bool storage_notice_is_error_ = false;
  bool context_notice_ = false;  // the status shows "oldest messages left out" for this conversation
  bool engine_error_ = false;    // the status shows an engine error, cleared by the next reply
};

}  // namespace specchat::ui
