// SQLite conversation store (see conversation_store.h). Each SQL statement is a named constant
// used by one small function; every write is one BEGIN IMMEDIATE transaction.
#include "storage/conversation_store.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "storage/rows.h"
#include "storage/migrations.h"
#include "storage/sql.h"

namespace specchat {
namespace {

namespace fs = std::filesystem;

// ---- connection setup -------------------------------------------------------------------------

// Writers wait this long for each other's write lock before failing with kind "busy".
constexpr int kBusyTimeoutMs = 5000;

// WAL: readers never block the writer nor see a half-written transaction. synchronous=FULL
// fsyncs the WAL at each commit so a committed message survives power loss too, not only a
// crash of the process; chat writes are a few per reply, so the cost does not show.
constexpr const char* kPragmaWal = "PRAGMA journal_mode = WAL";
constexpr const char* kPragmaForeignKeys = "PRAGMA foreign_keys = ON";
constexpr const char* kPragmaSynchronous = "PRAGMA synchronous = FULL";
constexpr const char* kQuickCheck = "PRAGMA quick_check";

bool is_corruption(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT;
}

sqlite3* open_connection(const std::string& path) {
  sqlite3* db = nullptr;
  // SQLITE_OPEN_URI: "file:...?mode=ro" opens read-only (what a write-protected file gives too).
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = "cannot open database " + path + ": " +
                            (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close_v2(db);
    throw StorageError(sql::error_kind(rc), msg);
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  return db;
}

// Runs PRAGMA quick_check. Returns an empty string when the file is sound, otherwise what is
// wrong with it. Errors other than corruption (I/O, busy) throw StorageError: they say nothing
// about the file's content and must not get it moved aside.
std::string find_corruption(sqlite3* db) {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db, kQuickCheck, -1, &st, nullptr);
  std::string problems;
  while (rc == SQLITE_OK || rc == SQLITE_ROW) {
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) break;
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const std::string line = t ? t : "";
    if (line != "ok" && problems.size() < 500) problems += (problems.empty() ? "" : "; ") + line;
  }
  sqlite3_finalize(st);
  if (is_corruption(rc)) return problems + (problems.empty() ? "" : "; ") + sqlite3_errstr(rc);
  if (rc != SQLITE_DONE) sql::fail(db, rc, kQuickCheck);
  return problems;
}

// Renames `from` to `to` when `from` exists. Throws StorageError "io" on failure.
void move_if_exists(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(from, ec)) return;
  fs::rename(from, to, ec);
  if (ec)
    throw StorageError("io", "cannot move corrupt database file " + from + " aside to " + to +
                                 ": " + ec.message());
}

// Moves a corrupt database and its journals aside; returns the new name of the main file.
// The -shm file is only an index of the -wal and is rebuilt, so it is removed.
std::string move_corrupt_aside(const std::string& path) {
  const std::string base = path + ".corrupt-" + std::to_string(sql::now_ms());
  std::string aside = base;
  std::error_code ec;
  for (int n = 2; fs::exists(aside, ec); ++n) aside = base + "-" + std::to_string(n);
  move_if_exists(path, aside);
  move_if_exists(path + "-wal", aside + "-wal");
  move_if_exists(path + "-journal", aside + "-journal");
  fs::remove(path + "-shm", ec);
  return aside;
}

// Closing the last connection would checkpoint the -wal into the main file and delete it, even
// for a file that is not a database: keep both byte for byte for the copy moved aside.
void keep_files_on_close(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  int persist = 1;
  sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
}

bool is_file_path(const std::string& path) { return !path.empty() && path != ":memory:"; }

// Opens `path`, recovering from a corrupt file, checks the schema and migrates it. On return
// `db` is a ready connection; on a throw the caller closes whatever `db` holds.
void open_database(const std::string& path, sqlite3*& db, StoreOpenInfo& info) {
  db = open_connection(path);
  if (std::string problem = find_corruption(db); !problem.empty()) {
    if (!is_file_path(path))
      throw StorageError("io", "in-memory database failed its check: " + problem);
    keep_files_on_close(db);
    sqlite3_close_v2(db);
    db = nullptr;
    info.recovered_from_corrupt = true;
    info.moved_aside_to = move_corrupt_aside(path);
    db = open_connection(path);
    if (problem = find_corruption(db); !problem.empty())
      throw StorageError("io", "fresh database " + path + " is unusable: " + problem);
  }
  migrations::check_compatible(db, path);
  sql::exec(db, kPragmaWal, kPragmaWal);  // ":memory:" stays in "memory" mode, which is fine
  sql::exec(db, kPragmaForeignKeys, kPragmaForeignKeys);
  sql::exec(db, kPragmaSynchronous, kPragmaSynchronous);
  migrations::migrate(db, path);
}

// ---- conversations ------------------------------------------------------------------------

constexpr const char* kInsertConversation =
    "INSERT INTO conversations (title, system_prompt, created_ms, updated_ms) "
    "VALUES (?1, ?2, ?3, ?3)";
constexpr const char* kRenameConversation = "UPDATE conversations SET title = ?2 WHERE id = ?1";
constexpr const char* kSetSystemPrompt =
    "UPDATE conversations SET system_prompt = ?2 WHERE id = ?1";
// max(): updated_ms never goes backwards when the wall clock does.
constexpr const char* kDeleteConversation = "DELETE FROM conversations WHERE id = ?1";
constexpr const char* kListConversations =
    "SELECT " SPECCHAT_CONVERSATION_COLUMNS " FROM conversations ORDER BY updated_ms DESC, id DESC";
constexpr const char* kSelectConversation =
    "SELECT " SPECCHAT_CONVERSATION_COLUMNS " FROM conversations WHERE id = ?1";

int64_t insert_conversation(sqlite3* db, const std::string& title, const std::string& prompt) {
  sql::Stmt st(db, kInsertConversation, "insert conversation");
  st.bind(1, title).bind(2, prompt).bind(3, sql::now_ms()).run();
  return sqlite3_last_insert_rowid(db);
}

// Runs an UPDATE of one conversation column; throws "not_found" when no row matched.
void update_conversation_text(sqlite3* db, const char* query, const char* what, int64_t id,
                              const std::string& value) {
  sql::Stmt st(db, query, what);
  st.bind(1, id).bind(2, value).run();
  if (sql::changes(db) == 0)
    throw StorageError("not_found", std::string(what) + ": no conversation " + std::to_string(id));
}

void delete_conversation_row(sqlite3* db, int64_t id) {
  sql::Stmt st(db, kDeleteConversation, "delete conversation");
  st.bind(1, id).run();
}

}  // namespace

// ---- ConversationStore --------------------------------------------------------------------

ConversationStore::ConversationStore(const std::string& path) : path_(path) {
  try {
    open_database(path_, db_, info_);
  } catch (...) {
    sqlite3_close_v2(db_);  // the destructor does not run when a constructor throws
    db_ = nullptr;
    throw;
  }
}

ConversationStore::~ConversationStore() { sqlite3_close_v2(db_); }

int ConversationStore::schema_version() { return migrations::latest_version(); }

bool ConversationStore::read_only() const { return sqlite3_db_readonly(db_, "main") == 1; }

bool is_finish_reason(const std::string& finish) {
  for (const char* name : {"", "length", "eos", "stop", "cancelled", "context_full"})
    if (finish == name) return true;
  return false;
}

int64_t ConversationStore::create_conversation(const std::string& title,
                                               const std::string& system_prompt) {
  sql::Transaction tx(db_);
  const int64_t id = insert_conversation(db_, title, system_prompt);
  tx.commit();
  return id;
}

void ConversationStore::rename_conversation(int64_t id, const std::string& title) {
  sql::Transaction tx(db_);
  update_conversation_text(db_, kRenameConversation, "rename conversation", id, title);
  tx.commit();
}

void ConversationStore::set_system_prompt(int64_t id, const std::string& system_prompt) {
  sql::Transaction tx(db_);
  update_conversation_text(db_, kSetSystemPrompt, "set system prompt", id, system_prompt);
  tx.commit();
}

void ConversationStore::delete_conversation(int64_t id) {
  sql::Transaction tx(db_);
  delete_conversation_row(db_, id);
  tx.commit();
}

std::vector<Conversation> ConversationStore::list_conversations() const {
  sql::Stmt st(db_, kListConversations, "list conversations");
  std::vector<Conversation> out;
  while (st.step()) out.push_back(rows::read_conversation(st));
  return out;
}

std::optional<Conversation> ConversationStore::conversation(int64_t id) const {
  sql::Stmt st(db_, kSelectConversation, "select conversation");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  return rows::read_conversation(st);
}

// ---- default path -------------------------------------------------------------------------

namespace {

// Creates `dir` (and parents); when `private_dir` and it was created here, owner-only access.
void make_directories(const fs::path& dir, bool private_dir) {
  std::error_code ec;
  const bool created = fs::create_directories(dir, ec);
  if (ec)
    throw StorageError("io", "cannot create directory " + dir.string() + ": " + ec.message());
  if (created && private_dir) fs::permissions(dir, fs::perms::owner_all, ec);  // best effort
}

std::string home_directory() {
  if (const char* h = std::getenv("HOME"); h && *h) return h;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir && *pw->pw_dir) return pw->pw_dir;
  throw StorageError("io", "no home directory (HOME unset and no passwd entry)");
}

}  // namespace

std::string default_database_path() {
  if (const char* o = std::getenv("SPECCHAT_DB"); o && *o) {
    const std::string p = o;
    if (is_file_path(p) && fs::path(p).has_parent_path())
      make_directories(fs::path(p).parent_path(), false);
    return p;
  }
  fs::path base;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x && fs::path(x).is_absolute())
    base = x;
  else
    base = fs::path(home_directory()) / ".local" / "share";
  const fs::path dir = base / "specchat";
  make_directories(dir, true);
  return (dir / "specchat.sqlite").string();
}

}  // namespace specchat
