// Schema of the conversation database and its forward-only migrations (STYLE.md §9).
//
// The schema version lives in PRAGMA user_version: 0 is an empty file, step N brings the schema
// from version N-1 to N. Steps are never edited once shipped (a file created by an old build must
// reach the same schema as a fresh one; tests/storage checks this against a frozen copy of
// version 1); a change is a new step appended to steps(). Internal to storage/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

struct sqlite3;

namespace specchat::migrations {

// PRAGMA application_id of a SpecChat database ("SpCh"), so another program's SQLite file given
// by mistake is refused instead of having our tables added to it.
constexpr int64_t kApplicationId = 0x53704368;

struct Step {
  int version;              // the user_version this step produces
  const char* description;  // one line, for error messages
  void (*apply)(sqlite3* db);  // runs inside the migration transaction; throws StorageError
};

// All steps, versions 1, 2, ... in order.
const std::vector<Step>& steps();

// The version this build writes (the last step's).
int latest_version();

// PRAGMA user_version of `db`. Throws StorageError (for example "io" for a file that is not a
// database).
int user_version(sqlite3* db);

// Read-only checks before anything is written: throws StorageError "newer_schema" when the file's
// user_version is above latest_version() (the message names both versions and `path`), and
// "foreign_database" when the file belongs to another program (a different application_id, or
// tables but no user_version).
void check_compatible(sqlite3* db, const std::string& path);

// Applies the missing steps in one BEGIN IMMEDIATE transaction (all or nothing), setting
// user_version after each, then checks foreign keys. A no-op, with no write lock taken, when the
// file is current; safe when several connections open the same new file at once (the version is
// re-read under the lock). Throws StorageError; the file is unchanged on failure.
void migrate(sqlite3* db, const std::string& path);

}  // namespace specchat::migrations
