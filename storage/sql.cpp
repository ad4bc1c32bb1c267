// sqlite3 C API helpers (see sql.h).
#include "storage/sql.h"

#include <chrono>

namespace specchat::sql {

const char* error_kind(int rc) {
  switch (rc & 0xff) {  // primary code of an extended one
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "busy";
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_NOLFS:
      return "io";
    default:
      return "sql";
  }
}

void fail(sqlite3* db, int rc, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  // sqlite3_errmsg describes the most recent failure on `db`; fall back to the code's own text
  // when there is no connection (open failed before one existed).
  msg += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  msg += " (sqlite code " + std::to_string(rc) + ")";
  throw StorageError(error_kind(rc), msg);
}

void exec(sqlite3* db, const char* sql, std::string_view what) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, what);
}

Stmt::Stmt(sqlite3* db, const char* sql, std::string_view what) : db_(db), what_(what) {
  const int rc = sqlite3_prepare_v2(db, sql, -1, &st_, nullptr);
  if (rc != SQLITE_OK) fail(db_, rc, what_);
}

Stmt::~Stmt() { sqlite3_finalize(st_); }

Stmt& Stmt::bind(int i, int64_t v) {
  const int rc = sqlite3_bind_int64(st_, i, static_cast<sqlite3_int64>(v));
  if (rc != SQLITE_OK) fail(db_, rc, what_);
  return *this;
}

Stmt& Stmt::bind_real(int i, double v) {
  const int rc = sqlite3_bind_double(st_, i, v);
  if (rc != SQLITE_OK) fail(db_, rc, what_);
  return *this;
}

Stmt& Stmt::bind(int i, const std::string& v) {
  const int rc = sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, what_);
  return *this;
}

Stmt& Stmt::bind_blob(int i, const std::vector<uint8_t>& v) {
  // sqlite3_bind_blob with a null pointer binds NULL, and an empty vector's data() may be null:
  // bind an explicit zero-length blob instead so "no tokens" and "unknown" stay distinct.
  const int rc = v.empty() ? sqlite3_bind_zeroblob(st_, i, 0)
                           : sqlite3_bind_blob64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) fail(db_, rc, what_);
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  const int rc = sqlite3_bind_null(st_, i);
  if (rc != SQLITE_OK) fail(db_, rc, what_);
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, rc, what_);
}

void Stmt::run() {
  if (step()) throw StorageError("sql", what_ + ": statement returned rows where none were expected");
}

void Stmt::reset() {
  sqlite3_reset(st_);  // reports the last step's error again, which step() already threw
  sqlite3_clear_bindings(st_);
}

bool Stmt::is_null(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }

int64_t Stmt::int64(int col) const { return static_cast<int64_t>(sqlite3_column_int64(st_, col)); }

double Stmt::real(int col) const { return sqlite3_column_double(st_, col); }

std::string Stmt::text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, col));
  const int n = sqlite3_column_bytes(st_, col);  // after column_text, per the sqlite docs
  return p ? std::string(p, static_cast<size_t>(n)) : std::string();
}

std::vector<uint8_t> Stmt::blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st_, col));
  const int n = sqlite3_column_bytes(st_, col);
  return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  exec(db_, "BEGIN IMMEDIATE", "BEGIN IMMEDIATE");
  open_ = true;
}

Transaction::~Transaction() {
  // Some errors (SQLITE_FULL, SQLITE_IOERR, ...) already rolled the transaction back; only roll
  // back one that is still open. Errors here cannot be reported from a destructor.
  if (open_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  exec(db_, "COMMIT", "COMMIT");
  open_ = false;
}

int64_t changes(sqlite3* db) { return sqlite3_changes(db); }

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace specchat::sql
