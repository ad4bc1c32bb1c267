// SQLite store for conversations and messages (ARCHITECTURE.md §5, STYLE.md §9).
//
// Schema versioned with PRAGMA user_version and forward-only migrations; WAL journal; foreign
// keys on. Messages keep their text *and* the exact token ids the model saw, pair-aligned
// (pair size 2, pad marker -1 appended when odd) with the tokenizer hash and template name.
// Every write runs in one explicit transaction. A file from a newer schema is refused
// (StorageError kind "newer_schema"); a corrupt file is moved aside to <path>.corrupt-<time>
// and a fresh database started (StoreOpenInfo says so, so the UI can tell the user).
//
// Also stored: generation runs per message, model files (path, sha256, size, architecture) and
// saved compare-view runs; export/import of a conversation is in storage/export.h.
//
// Messages form a tree (storage/branches.h): Regenerate, Continue and edit-and-resend store the
// new message as an alternative beside the one it replaces, which stays with its own branch
// (FAULT-KINDS B21: it never reaches the context). messages() returns the one active path (what
// goes into the model's context), all_messages() every stored row.
//
// Thread use: one ConversationStore per thread (each owns its sqlite3 connection). Several
// connections, in one process or several, may share a file: readers never block (WAL), writers
// wait up to 5 s for each other (busy_timeout) before failing with kind "busy".
//
// Errors: every failure throws StorageError; nothing here aborts. A failed write leaves the
// database as it was before the call (one transaction per call).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct sqlite3;

namespace specchat {

class StorageError : public std::runtime_error {
 public:
  StorageError(std::string kind, const std::string& m) : std::runtime_error(m), kind_(std::move(kind)) {}
  // "newer_schema": the file was written by a newer build (left unchanged).
  // "foreign_database": the file is another program's SQLite database (left unchanged).
  // "io": cannot open/read/write the file (permissions, disk full, unrecoverable corruption).
  // "busy": another connection held the write lock for longer than the busy timeout.
  // "invalid": the caller passed a value the store refuses (unknown role, negative token id...).
  // "not_found": the conversation or message named by id does not exist.
  // "corrupt": a stored row fails its own invariants (for example a malformed token blob).
  // "sql": anything else reported by SQLite (a bug rather than a user condition).
  const std::string& kind() const { return kind_; }
 private:
  std::string kind_;
};

struct Conversation {
  int64_t id = 0;
  std::string title;
  std::string system_prompt;
  int64_t created_ms = 0, updated_ms = 0;  // Unix epoch milliseconds
};

// Per-message generation summary (empty for user messages).
struct MessageStats {
  std::string mode;           // "speculative" / "baseline"
  int n_tokens = 0;
  double tokens_per_s = 0, ttft_ms = 0, acceptance_rate = 0, mean_accepted_length = 0;
  int n_drafted = 0, n_accepted = 0;
};

struct Message {
  int64_t id = 0;
  int64_t conversation_id = 0;
  std::string role;                 // "system", "user", "assistant"
  std::string text;
  std::vector<int32_t> token_ids;   // raw token ids (unpadded) the model saw / produced
  std::vector<uint8_t> drafted;     // per token: 1 = accepted draft token (assistant only)
  uint64_t tokenizer_hash = 0;
  std::string template_name;
  MessageStats stats;
  int64_t created_ms = 0;           // Unix epoch ms; 0 on add_message means "now"
  // The message this one follows (0: the conversation's first message); messages with the same
  // parent are alternatives of one place (storage/branches.h).
  int64_t parent_id = 0;
  // Chosen among its alternatives: the active path follows chosen messages from the first one.
  // false: replaced (by Regenerate, Continue or an edit) or on a branch switched away from.
  bool active = true;
  // Assistant replies: why generation ended, engine/generator.h's finish_reason_name() ("length":
  // max tokens reached, "eos": the model ended it, "stop": a stop string, "cancelled": the user
  // stopped it, "context_full": the context window filled up); "" = unknown (user messages, rows
  // stored before schema 4).
  std::string finish;
};

// Whether `finish` is a value Message::finish may hold (one of the names above, or empty).
bool is_finish_reason(const std::string& finish);

// One generation run behind an assistant message (a row of `generations`): several per message
// when a reply was regenerated with other settings. The JSON fields are stored as given (must be
// valid JSON or empty; empty reads back as "").
struct GenerationRecord {
  int64_t id = 0;
  int64_t message_id = 0;
  std::string mode;                // "speculative" / "baseline"; required
  std::string params_json;         // sampling and drafter settings
  std::string stats_json;          // summary (tokens/s, TTFT, alpha, tau, ...)
  std::vector<int> accepted_hist;  // [k + 1]: entry i = verify steps that accepted i drafts
  int64_t created_ms = 0;          // Unix epoch ms; 0 on record_generation means "now"
};

// A model file seen by the app (a row of `models`, one per path).
struct ModelRecord {
  int64_t id = 0;
  std::string path;          // absolute path of the GGUF file; required, unique
  std::string sha256;        // lowercase hex of the file's SHA-256 (sha256_file), or ""
  int64_t size_bytes = 0;    // file size in bytes
  std::string architecture;  // GGUF general.architecture, e.g. "llama"
};

// A saved compare-view run (a row of `compare_runs`): one prompt, baseline then speculative.
// baseline_json / speculative_json hold each side's measurements (tokens/s, TTFT ms, total ms,
// n_tokens, optionally token ids); every *_json field must be valid JSON or empty.
struct CompareRecord {
  int64_t id = 0;
  std::optional<int64_t> conversation_id;  // the prompt's conversation; nullopt: none, or deleted
  int64_t created_ms = 0;                  // Unix epoch ms; 0 on save means "now"
  std::string prompt;
  std::string params_json, baseline_json, speculative_json;
  // RequestPlanner::compare's definitions (engine/runtime/request_planner.h): speculative decode
  // tokens/s over baseline decode tokens/s, and beside it baseline total time over speculative
  // total time (prefill included). Both finite, >= 0 (0 = unknown).
  double speedup = 0;
  double total_time_ratio = 0;
  bool identical = false;    // greedy verdict: the two token streams are the same
  int64_t first_diff = -1;   // first differing token position; -1 exactly when identical
};

// A PIPO reply's latent-format history (schema 7, docs/design/pipo.md): the pair sequence the
// release's backbone held at the end of the reply ([2 · n_pairs] ids, PAD = kPairPad only in
// second slots), and the release that made it.
struct MessageLatents {
  std::string release;
  std::vector<int32_t> pairs;
};

// A saved benchmark run of the app's Benchmark view (a row of `bench_runs`, schema 6).
// report_json is the run's whole report.json (app/cli/bench/report_files.h: metadata, every
// request record, waves, aggregates), stored as given; the other fields are its summary for
// the list of runs.
struct BenchRunRecord {
  int64_t id = 0;
  int64_t created_ms = 0;   // Unix epoch ms; 0 on save means "now"
  std::string title;        // e.g. "qualitative · baseline, chain:k=4 · c=1,2"
  std::string suite;        // the suite's name
  int64_t n_records = 0;    // requests recorded
  int64_t failures = 0;     // requests that failed or differ from baseline
  std::string report_json;  // empty in bench_runs() listings
};

struct StoreOpenInfo {
  bool recovered_from_corrupt = false;
  std::string moved_aside_to;  // path of the corrupt file, when recovered
};

// Token ids in latent-compatible form (ARCHITECTURE.md §5): pair size 2, pad marker -1.
inline constexpr int32_t kPairPad = -1;

// Pads ids to even length by appending one kPairPad when the count is odd.
// Throws std::invalid_argument when an id is negative (it could be confused with the pad).
std::vector<int32_t> pair_align(const std::vector<int32_t>& ids);
// Reverses pair_align: drops a trailing kPairPad. Throws std::invalid_argument when `padded` has
// odd length or holds a negative value anywhere but as the final pad.
std::vector<int32_t> pair_unalign(const std::vector<int32_t>& padded);

class ConversationStore {
 public:
  // Opens or creates the database at `path` (":memory:" allowed, and SQLite URI filenames such
  // as "file:/x/chat.sqlite?mode=ro"; the parent directory must exist), migrating an older schema forward. A file that is not a database or fails
  // PRAGMA quick_check is renamed to <path>.corrupt-<epoch ms> (with its -wal/-journal files)
  // and a fresh database is created; open_info() says so. Throws StorageError: "newer_schema",
  // "foreign_database", "io", "busy".
  explicit ConversationStore(const std::string& path);
  ~ConversationStore();
  ConversationStore(const ConversationStore&) = delete;
  ConversationStore& operator=(const ConversationStore&) = delete;

  const StoreOpenInfo& open_info() const { return info_; }
  // True when the connection cannot write: the file (or a URI with mode=ro) is read-only, e.g.
  // chmod a-w or chattr +i. Reads work; every write throws StorageError "io". Checked once at
  // open so the app can say at start that nothing will be saved.
  bool read_only() const;
  static int schema_version();  // the version this build writes (PRAGMA user_version)
  const std::string& path() const { return path_; }

  // Returns the new id. created_ms = updated_ms = now.
  int64_t create_conversation(const std::string& title, const std::string& system_prompt = "");
  // Neither changes updated_ms (the list order follows conversation activity, not edits).
  // Both throw StorageError "not_found" for an unknown id.
  void rename_conversation(int64_t id, const std::string& title);
  void set_system_prompt(int64_t id, const std::string& system_prompt);
  // Messages (and their generations) go with it (ON DELETE CASCADE); its compare runs stay,
  // unlinked (conversation_id becomes nullopt). Unknown id: no-op.
  void delete_conversation(int64_t id);
  std::vector<Conversation> list_conversations() const;  // newest updated_ms first, then newest id
  std::optional<Conversation> conversation(int64_t id) const;  // nullopt when unknown

  // Appends m (its id, parent_id and active flag are ignored) to the end of the conversation's
  // active path and returns the new id; sets the conversation's updated_ms to now. Throws
  // StorageError "not_found" (unknown conversation) or "invalid" (role not system/user/assistant,
  // a negative token id, drafted neither empty nor one 0/1 per token).
  int64_t add_message(const Message& m);
  // Regenerate / Continue / edit-and-resend, in one transaction: stores m as an alternative of
  // `replaced_id` (same parent) and makes it the active one there; the replaced message stays,
  // inactive, with the branch below it (m.conversation_id may be 0). Returns the new id. Throws
  // like add_message, and "not_found" for an unknown replaced_id or "invalid" when m names
  // another conversation or has another role than the replaced message.
  int64_t add_message_replacing(int64_t replaced_id, const Message& m);
  // The active path (storage/branches.h), first message first: what a context is rebuilt from.
  // Throws StorageError "corrupt" when a stored token blob breaks its invariants (ids are never
  // silently dropped).
  std::vector<Message> messages(int64_t conversation_id) const;
  // Every stored message including inactive branches, in insertion order.
  std::vector<Message> all_messages(int64_t conversation_id) const;
  // Deletes one message; its children (the rest of the path) follow its parent instead, so the
  // path goes on without it. When it was the shown (active) message and had no child to take
  // its place, the newest remaining message at its place is shown instead, with its branch.
  // Unknown id: no-op.
  void delete_message(int64_t message_id);
  // The alternatives of message `id` (branches::alternatives: same parent), in insertion order,
  // `id` included. Empty for an unknown id.
  std::vector<Message> alternatives(int64_t id) const;
  // For each message on the active path that has alternatives: its id and the ids of all its
  // alternatives (itself included, insertion order). Path order.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> path_alternatives(int64_t conversation_id) const;
  // Makes alternative `to_id` the active one instead of `from_id`, in one transaction, and the
  // path below it the branch it had (the branch's chosen messages; where a message has children
  // but none chosen, as in branches stored before schema 5, its newest child). Throws
  // StorageError "not_found" (unknown id) or "invalid" (not two alternatives of one place, or
  // `from_id` not active).
  void switch_alternative(int64_t from_id, int64_t to_id);

  // ---- search, generations, models, compare runs, import (store_records.cpp) ----

  // Conversations whose title or any message's text (inactive branches included: the user can
  // switch back to them) contains `text` as a substring, newest updated first like
  // list_conversations(). Case-insensitive for ASCII letters only (SQLite LIKE); '%', '_' and
  // '\' in `text` match themselves. An empty `text` matches every conversation.
  std::vector<Conversation> search_conversations(const std::string& text) const;

  // Stores g for `message_id` (g.id and g.message_id are ignored) and returns the new id.
  // Throws StorageError "not_found" (unknown message) or "invalid" (empty mode, a *_json field
  // that is neither empty nor valid JSON, a negative histogram entry).
  int64_t record_generation(int64_t message_id, const GenerationRecord& g);
  // The message's generations, oldest first (empty for an unknown message).
  std::vector<GenerationRecord> generations(int64_t message_id) const;

  // Inserts m, or updates the row with the same path (sha256, size, architecture replaced).
  // Returns the row's id (unchanged by an update). Throws StorageError "invalid" for an empty
  // path or a negative size.
  int64_t upsert_model(const ModelRecord& m);
  std::optional<ModelRecord> model_by_path(const std::string& path) const;  // nullopt: unknown

  // Stores r (r.id ignored) and returns the new id. Throws StorageError "not_found" (a
  // conversation_id that does not exist) or "invalid" (first_diff not -1 exactly when identical,
  // first_diff < -1, speedup negative or not finite, a *_json field that is not valid JSON).
  int64_t save_compare_run(const CompareRecord& r);
  // Newest first; only those of `conversation_id` when given (all runs otherwise).
  std::vector<CompareRecord> compare_runs(std::optional<int64_t> conversation_id = std::nullopt) const;

  // Stores r (id ignored) and returns the new id. Throws StorageError "invalid" (report_json
  // not a JSON object, negative counts).
  int64_t save_bench_run(const BenchRunRecord& r);

  // ---- PIPO latent-format history (store_latents.cpp, schema 7) ----
  // Stores (or replaces) message `message_id`'s pair sequence. Throws StorageError "not_found"
  // (unknown message) or "invalid" (empty release, empty or odd-length pairs, a PAD in a first
  // slot, a negative id that is not the PAD).
  void set_message_latents(int64_t message_id, const MessageLatents& l);
  // nullopt when the message has none (a lossless reply, or stored before schema 7). Throws
  // StorageError "corrupt" when the stored blob breaks the invariants above.
  std::optional<MessageLatents> message_latents(int64_t message_id) const;
  // Every message of conversation `conversation_id` that has latents, by message id (empty for
  // an unknown conversation). Throws StorageError "corrupt" as message_latents.
  std::map<int64_t, MessageLatents> conversation_latents(int64_t conversation_id) const;
  // Every saved benchmark run, newest first, without report_json (read it with bench_run).
  std::vector<BenchRunRecord> bench_runs() const;
  std::optional<BenchRunRecord> bench_run(int64_t id) const;  // nullopt when unknown
  void delete_bench_run(int64_t id);                          // unknown id: no-op

  // Stores c (its id ignored) with all its messages in one transaction, preserving titles,
  // created/updated times (0 = now), and per message: text, role, token ids, drafted, tokenizer
  // hash, template name, stats, parent, active flag, created time. Message ids and parent ids
  // name messages within `all_messages` (they get new ids here; conversation ids are ignored);
  // the order of `all_messages` is kept. `latents` (PIPO replies' pair sequences) are keyed by
  // those ids too (index + 1 for a list without ids) and stored in the same transaction.
  // Returns the new conversation's id. Throws StorageError "invalid" (as add_message,
  // branches::validate_tree or set_message_latents, or latents for an id not in the list) and
  // stores nothing then.
  int64_t import_conversation(const Conversation& c, const std::vector<Message>& all_messages,
                              const std::map<int64_t, MessageLatents>& latents = {});

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
  StoreOpenInfo info_;
};

// Default database location: $XDG_DATA_HOME/specchat/specchat.sqlite (an absolute
// XDG_DATA_HOME only, per the XDG spec; else ~/.local/share/specchat/specchat.sqlite). The
// specchat directory is created owner-only (chat history is private). A non-empty SPECCHAT_DB
// overrides the whole path (tests); its parent directory is created. Throws StorageError "io"
// when no home directory is known or a directory cannot be created.
std::string default_database_path();

// SHA-256 of the file's bytes as 64 lowercase hex digits (FIPS 180-4, via OpenSSL's libcrypto).
// Reads the whole file (seconds for a multi-GB GGUF: call it off the GUI thread). Throws
// StorageError "io" when the file cannot be opened or read.
std::string sha256_file(const std::string& path);

}  // namespace specchat
