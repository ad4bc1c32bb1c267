// Internal helpers over the sqlite3 C API shared by storage/*.cpp: RAII prepared statements,
// write transactions, and the mapping from sqlite result codes to StorageError kinds.
// Not part of the public API; include only from storage/.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat::sql {

// StorageError kind for an sqlite result code (primary or extended): "busy" (lock not obtained
// within the busy timeout), "io" (disk, permissions, full, corrupt file) or "sql" (everything
// else: constraint violations, misuse, bad SQL).
const char* error_kind(int rc);

// Throws StorageError(error_kind(rc), "<what>: <sqlite message> (code N)").
[[noreturn]] void fail(sqlite3* db, int rc, std::string_view what);

// Runs `sql` (one or more statements with no parameters; result rows ignored).
// `what` names the statement in error messages. Throws StorageError.
void exec(sqlite3* db, const char* sql, std::string_view what);

// One prepared statement, finalized on destruction. Parameter and column indices are those of
// sqlite: parameters count from 1, columns from 0. Every failure throws StorageError naming
// `what`.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, std::string_view what);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind_real(int i, double v);
  Stmt& bind(int i, const std::string& v);                 // UTF-8 text, copied
  Stmt& bind_blob(int i, const std::vector<uint8_t>& v);   // empty -> zero-length blob, not NULL
  Stmt& bind_null(int i);

  bool step();  // true: a row is ready to read; false: the statement is done
  void run();   // steps to completion; a statement that returns rows is an error here
  void reset();  // ready to bind and run again (bindings cleared to NULL)

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;            // NULL reads as ""
  std::vector<uint8_t> blob(int col) const;   // NULL reads as empty

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  std::string what_;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, waiting up to the busy
// timeout, so a write never fails half-way with SQLITE_BUSY_SNAPSHOT); ROLLBACK on destruction
// unless commit() succeeded. Throws StorageError ("busy" when the lock is not obtained).
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  sqlite3* db_;
  bool open_ = false;
};

// Rows changed by the last INSERT/UPDATE/DELETE on `db`.
int64_t changes(sqlite3* db);

// Wall-clock time, Unix epoch milliseconds.
int64_t now_ms();

}  // namespace specchat::sql
