// The storage side of the app: a QObject that owns the ConversationStore (one SQLite connection)
// and lives on its own QThread (STYLE.md §8/§9, after gpt4all's Database). The GUI thread never
// touches SQLite: it queues slots and receives results as value types through signals. Every
// write is one ConversationStore call, i.e. one transaction.
//
// Pending ids: the GUI cannot wait for an insert to learn its id, so it names a conversation or
// message it has asked to create by a negative "pending id" (-token, tokens unique per
// process). Slots accept either a real id (> 0) or a pending id; the worker maps pending ids to
// the real ones it created (requests run in order, so the create always ran first) and reports
// each mapping (conversationCreated / messageSaved). A pending id that never got a row (the
// create failed) makes the later request fail with a message instead of touching another row.
#pragma once

#include <QList>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QThread>

#include <memory>
#include <unordered_map>
#include <vector>

#include "storage/conversation_store.h"
#include "ui/pipo_types.h"

namespace specchat::ui {

// What opening the database found; returned once, at startup.
struct StorageOpenResult {
  bool ok = false;                  // false: no database; the chat works unsaved
  QString status;                   // for the status line: why it is not saved, or a moved-aside file
  bool status_is_error = false;
  // The file opened read-only (write-protected, immutable, or a mode=ro URI): the history can be
  // read but every write fails, so the app says at start that nothing new will be saved.
  bool read_only = false;
  std::vector<Conversation> conversations;  // newest first
  Conversation current;                     // most recent conversation (or a new empty one)
  std::vector<Message> messages;            // its active path
};

// Export formats of exportConversation.
enum class ExportFormat { markdown, html, json };

class StorageWorker : public QObject {
  Q_OBJECT

 public:
  explicit StorageWorker(QObject* parent = nullptr);
  ~StorageWorker() override;

  // Worker thread (called through a blocking queued call by StorageHost, once). Opens `path`
  // (empty: reports "no database location"), and loads the newest conversation or creates one.
  // Never throws.
  StorageOpenResult open(const QString& path);

 public Q_SLOTS:
  // Conversation list filter: empty = all, else search_conversations(text). Re-emits the list.
  void setFilter(const QString& text);
  // Creates a conversation; `pending_id` (< 0) names it until conversationCreated arrives.
  void createConversation(qint64 pending_id, const QString& title, const QString& system_prompt);
  // Emits conversationLoaded with the active path (or failed when unknown).
  void loadConversation(qint64 id);
  void renameConversation(qint64 id, const QString& title);
  void setSystemPrompt(qint64 id, const QString& system_prompt);
  void deleteConversation(qint64 id);
  // Stores `m` (m.conversation_id may be pending) and emits messageSaved(pending_id, id).
  void addMessage(qint64 pending_id, const specchat::Message& m);
  // Emits alternativesLoaded with the alternatives of conversation `conversation_id`'s active
  // path (path_alternatives); the id may be pending.
  void loadAlternatives(qint64 conversation_id);
  // Makes alternative `to_id` active instead of `from_id`, then emits conversationLoaded for
  // their conversation (the new active path); failures are reported.
  void switchAlternative(qint64 from_id, qint64 to_id);
  // Deletes message `id` (may be pending); failures are reported.
  void deleteMessage(qint64 id);
  // Regenerate: add_message_replacing(replaced_id, m); replaced_id may be pending.
  void replaceMessage(qint64 pending_id, qint64 replaced_id, const specchat::Message& m);
  // Writes conversation `id` (all messages, inactive branches included) to `path` atomically
  // (QSaveFile). Emits exported or failed.
  void exportConversation(qint64 id, specchat::ui::ExportFormat format, const QString& path);
  // Reads a "specchat-conversation" JSON file and imports it; emits imported or failed. The copy
  // is titled "<title> (imported)" when a conversation with its title exists.
  void importJson(const QString& path);
  // Records how reply `message_id` (may be pending) was generated: mode, parameters, stats and
  // the accepted-length histogram (generations table). Failures are reported, nothing else.
  void recordGeneration(qint64 message_id, const specchat::GenerationRecord& g);
  // The generation record of conversation `id`'s last assistant message on its active path;
  // emits lastGeneration (found false when there is none).
  void loadLastGeneration(qint64 id);
  // Records a model file in the models table: path, size, SHA-256 (computed here, on the
  // storage thread; skipped when the same path and size are already recorded), architecture.
  void recordModel(const QString& path, const QString& architecture);
  // Saves a compare-view result (compare_runs table); emits compareSaved or failed.
  void saveCompareRun(const specchat::CompareRecord& r);
  // Benchmark view (storage_worker_bench.cpp): saves a run and emits benchRunSaved; lists the
  // saved runs (benchRunsListed, newest first, without reports); reads one (benchRunLoaded);
  // deletes one (then lists again); lists the saved compare runs (compareRunsListed). Failures
  // and "no database" come as benchStorageFailed.
  void saveBenchRun(const specchat::BenchRunRecord& r);
  void listBenchRuns();
  void loadBenchRun(qint64 id);
  void deleteBenchRun(qint64 id);
  void listCompareRuns();
  // PIPO (storage_worker_pipo.cpp): stores reply `message_id`'s (may be pending) pair sequence
  // (set_message_latents); failures are reported. resolvePipoHistory: the latents the next PIPO
  // turn continues, from the request's assistant messages in path order (in-memory latents win;
  // the others' are read from the database, pending ids resolved); emits pipoHistoryResolved,
  // also when a read fails (then as if none had latents, with the failure reported).
  void setMessageLatents(qint64 message_id, const specchat::MessageLatents& latents);
  void resolvePipoHistory(quint64 job_id, const std::vector<specchat::ui::PipoHistoryEntry>& entries);
  // Nothing: a blocking call to it waits until every earlier request has run.
  void flush() {}

 Q_SIGNALS:
  void conversationsListed(const std::vector<specchat::Conversation>& conversations);
  void conversationCreated(qint64 pending_id, const specchat::Conversation& c);
  void conversationLoaded(const specchat::Conversation& c, const std::vector<specchat::Message>& messages);
  void messageSaved(qint64 pending_id, qint64 id);
  // addMessage / replaceMessage failed: message `pending_id` was not stored, because `reason`.
  void messageSaveFailed(qint64 pending_id, const QString& reason);
  // renameConversation(`id`) failed; `stored_title` is the title the database still holds (empty
  // when the conversation has no row), so the window title can follow the list again.
  void renameFailed(qint64 id, const QString& stored_title, const QString& reason);
  void exported(const QString& path);
  void imported(const specchat::Conversation& c);
  void compareSaved(qint64 id);
  // By message id on the active path: the ids of its alternatives (itself included, insertion
  // order); only messages that have some. `conversation_id` as requested (may be pending).
  void alternativesLoaded(qint64 conversation_id, const QHash<qint64, QList<qint64>>& alternatives);
  void lastGeneration(qint64 conversation_id, bool found, const specchat::GenerationRecord& record);
  // A request failed; `what` names the action and the reason. Nothing else changed.
  void failed(const QString& what);
  void benchRunSaved(qint64 id);
  void benchRunsListed(const std::vector<specchat::BenchRunRecord>& runs);
  void benchRunLoaded(const specchat::BenchRunRecord& run);
  void compareRunsListed(const std::vector<specchat::CompareRecord>& runs);
  void benchStorageFailed(const QString& what);
  void pipoHistoryResolved(quint64 job_id, const specchat::ui::PipoHistory& history);

 private:
  // Real id for `id` (pending ids mapped); 0 when a pending id has no row.
  int64_t resolve(qint64 id) const;
  void emitList();

  std::unique_ptr<ConversationStore> store_;
  std::unordered_map<qint64, int64_t> created_;  // pending id -> real id
  std::string filter_;
};

// Owns the storage thread and the worker on it (like EngineHost). On destruction it waits for
// every queued request to run (so no committed-looking write is lost), then stops the thread.
class StorageHost {
 public:
  StorageHost();
  ~StorageHost();
  StorageHost(const StorageHost&) = delete;
  StorageHost& operator=(const StorageHost&) = delete;

  StorageWorker* worker() const { return worker_; }
  // Runs StorageWorker::open on the storage thread and waits for it (startup only: the window
  // needs the conversation list before it can show anything useful).
  StorageOpenResult open(const QString& path);
  // Waits until every request queued so far has run.
  void flush();

 private:
  QThread thread_;
  StorageWorker* worker_;
};

// Registers the value types above for queued connections (idempotent).
void register_storage_types();

}  // namespace specchat::ui

Q_DECLARE_METATYPE(specchat::Conversation)
Q_DECLARE_METATYPE(specchat::Message)
Q_DECLARE_METATYPE(std::vector<specchat::Conversation>)
Q_DECLARE_METATYPE(std::vector<specchat::Message>)
Q_DECLARE_METATYPE(specchat::ui::ExportFormat)
Q_DECLARE_METATYPE(specchat::GenerationRecord)
