// Schema migrations (see migrations.h). Each step is a named SQL constant and a small function.
#include "storage/migrations.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "storage/branches.h"
#include "storage/sql.h"

namespace specchat::migrations {
namespace {

// Version 1: every table the first releases need, created at once so later work adds columns
// only when something new is stored.
//
// messages.token_ids: the ids the model saw or produced, pair-aligned for a 2-to-1 input
//   compressor (ARCHITECTURE.md §5): int32 little-endian, a -1 pad appended when the count is
//   odd. raw_len counts the real ids, latent_len = padded length / 2 (so the blob is
//   8 * latent_len bytes). n_tokens mirrors MessageStats::n_tokens (tokens generated, 0 for user
//   turns) for SQL aggregates that should not parse stats_json.
// messages.drafted: one byte per token (1 = an accepted draft token), or empty.
// messages.tokenizer_hash: the 64-bit hash stored bit-for-bit in a signed INTEGER.
// messages.active: 0 for a reply replaced by Regenerate (kept as an inactive branch, outside
//   the context; FAULT-KINDS B21), so a conversation has one active path (version 5 refines it:
//   chosen among the messages sharing a parent).
constexpr const char* kSchemaV1 = R"sql(
PRAGMA application_id = 1399866216;
CREATE TABLE conversations (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  title         TEXT    NOT NULL DEFAULT '',
  system_prompt TEXT    NOT NULL DEFAULT '',
  created_ms    INTEGER NOT NULL,
  updated_ms    INTEGER NOT NULL
);
CREATE INDEX conversations_by_updated ON conversations(updated_ms DESC, id DESC);
CREATE TABLE messages (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  role            TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
  text            TEXT    NOT NULL DEFAULT '',
  token_ids       BLOB    NOT NULL DEFAULT x'',
  raw_len         INTEGER NOT NULL DEFAULT 0 CHECK (raw_len >= 0),
  latent_len      INTEGER NOT NULL DEFAULT 0,
  n_tokens        INTEGER NOT NULL DEFAULT 0,
  drafted         BLOB    NOT NULL DEFAULT x'',
  tokenizer_hash  INTEGER NOT NULL DEFAULT 0,
  template_name   TEXT    NOT NULL DEFAULT '',
  stats_json      TEXT,
  created_ms      INTEGER NOT NULL,
  active          INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
  CHECK (latent_len = (raw_len + 1) / 2),
  CHECK (length(token_ids) = 8 * latent_len),
  CHECK (length(drafted) IN (0, raw_len))
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE generations (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id         INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  mode               TEXT    NOT NULL,
  params_json        TEXT,
  stats_json         TEXT,
  accepted_hist_json TEXT,
  created_ms         INTEGER NOT NULL
);
CREATE INDEX generations_by_message ON generations(message_id);
CREATE TABLE models (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  path         TEXT    NOT NULL,
  sha256       TEXT,
  size_bytes   INTEGER,
  architecture TEXT,
  UNIQUE (path)
);
)sql";

// Version 2: saved runs of the compare view (baseline vs speculative on one prompt).
//
// conversation_id: the conversation the prompt came from, or NULL; deleting that conversation
//   keeps its compare runs (measurements outlive the chat) and clears the link.
// baseline_json / speculative_json: one side's measurements as JSON (tokens/s, TTFT ms, total
//   ms, n_tokens, optionally the token ids); params_json: the sampling and drafter settings.
// identical / first_diff: the greedy verdict; first_diff is the first differing token position,
//   -1 exactly when the two token streams are identical.
// compare_runs_by_conversation serves the per-conversation list and the ON DELETE SET NULL
//   lookup (SQLite scans the child table on a parent delete without one).
// No index for conversation search: search_conversations() matches substrings (LIKE '%x%'),
//   which no B-tree index can serve; a scan of the messages' text is milliseconds at chat-history
//   sizes. An FTS5 table would be the step after that, if histories grow to millions of rows.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE compare_runs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id  INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  created_ms       INTEGER NOT NULL,
  prompt           TEXT    NOT NULL DEFAULT '',
  params_json      TEXT,
  baseline_json    TEXT,
  speculative_json TEXT,
  speedup          REAL,
  identical        INTEGER NOT NULL CHECK (identical IN (0, 1)),
  first_diff       INTEGER NOT NULL DEFAULT -1,
  CHECK ((identical = 1 AND first_diff = -1) OR (identical = 0 AND first_diff >= 0))
);
CREATE INDEX compare_runs_by_conversation ON compare_runs(conversation_id, id);
)sql";

// Version 3: a compare run keeps both numbers RequestPlanner::compare defines (issue 9; one
// definition for every front end): `speedup` is the decode tokens/s ratio (speculative /
// baseline) and `total_time_ratio` (baseline total time / speculative total time, prefill
// included) is stored beside it. Rows saved before held a ratio of total-time tokens/s in
// `speedup`; apply_v3 recomputes both from each side's JSON ("tokens_per_s" is the decode speed,
// "total_ms" the side's total time), 0 where those are missing. In C++ rather than SQL's json
// functions, which an SQLite build may leave out.
constexpr const char* kSchemaV3 = "ALTER TABLE compare_runs ADD COLUMN total_time_ratio REAL NOT NULL DEFAULT 0";
constexpr const char* kSelectCompareSides = "SELECT id, baseline_json, speculative_json FROM compare_runs";
constexpr const char* kUpdateCompareRatios = "UPDATE compare_runs SET speedup = ?2, total_time_ratio = ?3 WHERE id = ?1";

// Version 4: why each reply ended (issue 12), so a reply cut by max tokens or a full context says
// so after a restart: engine/generator.h's finish_reason_name() ("length", "eos", "stop",
// "cancelled", "context_full"); '' for user messages and for replies stored before, whose reason
// was never recorded.
constexpr const char* kSchemaV4 = "ALTER TABLE messages ADD COLUMN finish TEXT NOT NULL DEFAULT ''";

// Version 5: messages form a tree (storage/branches.h, issue 12): parent_id is the message a
// message follows (NULL for a conversation's first), and `active` now means "chosen among the
// messages sharing its parent" instead of "on the active path", so an alternative of an earlier
// reply keeps the branch below it. apply_v5 fills parent_id for the rows stored before
// (branches::infer_legacy_parents: the active path stays exactly as it was).
// messages_by_parent serves child lookups and the foreign key check of a delete;
// messages_one_active allows one chosen message per place (ifnull: NULL parents are equal here).
constexpr const char* kSchemaV5Column = "ALTER TABLE messages ADD COLUMN parent_id INTEGER REFERENCES messages(id)";
constexpr const char* kSchemaV5Indexes = R"sql(
CREATE INDEX messages_by_parent ON messages(parent_id);
CREATE UNIQUE INDEX messages_one_active ON messages(conversation_id, ifnull(parent_id, 0)) WHERE active = 1;
)sql";
constexpr const char* kSelectMessagePlaces = "SELECT id, conversation_id, role, active FROM messages ORDER BY conversation_id, id";
constexpr const char* kUpdateParent = "UPDATE messages SET parent_id = ?2 WHERE id = ?1";

// Version 6: saved runs of the app's Benchmark view (issue 15). report_json holds the run's
// report.json (every request record and the aggregates); the other columns summarise it for the
// list of runs, so listing never parses the reports.
constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE bench_runs (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  created_ms  INTEGER NOT NULL,
  title       TEXT    NOT NULL DEFAULT '',
  suite       TEXT    NOT NULL DEFAULT '',
  n_records   INTEGER NOT NULL DEFAULT 0 CHECK (n_records >= 0),
  failures    INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
  report_json TEXT    NOT NULL
);
CREATE INDEX bench_runs_by_created ON bench_runs(created_ms DESC, id DESC);
)sql";

// Version 7: PIPO's latent-format history (issue 16, docs/design/pipo.md). A reply generated in
// the approximate PIPO mode keeps, beside its raw ids in `messages`, the whole pair sequence the
// release's backbone saw up to the end of that reply (prompt pairs and reply pairs, PAD = -1 in
// second slots), so the conversation continues from exactly those latents without re-encoding.
// `release` names the PIPO release (pipo.release) that made them: another release re-prefills.
// raw_len = ids that are not PAD. A side table, so the raw rows keep their invariants.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE message_latents (
  message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
  release    TEXT    NOT NULL CHECK (release <> ''),
  pairs      BLOB    NOT NULL,
  raw_len    INTEGER NOT NULL,
  CHECK (length(pairs) > 0 AND length(pairs) % 8 = 0),
  CHECK (raw_len * 8 >= length(pairs) AND raw_len * 4 <= length(pairs))
);
)sql";

constexpr const char* kSelectUserVersion = "PRAGMA user_version";
// One statement, so one snapshot: read separately, a connection racing ours to create the same
// new file could commit in between and make it look like another program's file.
constexpr const char* kSelectFileIdentity =
    "SELECT (SELECT user_version FROM pragma_user_version), "
    "(SELECT application_id FROM pragma_application_id), (SELECT count(*) FROM sqlite_master)";
constexpr const char* kForeignKeyCheck = "PRAGMA foreign_key_check";

void apply_v1(sqlite3* db) { sql::exec(db, kSchemaV1, "migration 1 (initial schema)"); }
void apply_v2(sqlite3* db) { sql::exec(db, kSchemaV2, "migration 2 (compare_runs)"); }

// A positive finite number at `key` of a side's JSON text, else 0.
double side_number(const std::string& side_json, const char* key) {
  const nlohmann::json j = nlohmann::json::parse(side_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(key) || !j.at(key).is_number()) return 0.0;
  const double v = j.at(key).get<double>();
  return std::isfinite(v) && v > 0 ? v : 0.0;
}

double ratio(double num, double den) { return num > 0 && den > 0 ? num / den : 0.0; }

void apply_v3(sqlite3* db) {
  sql::exec(db, kSchemaV3, "migration 3 (compare_runs.total_time_ratio)");
  struct Row {
    int64_t id;
    double speedup, total_time_ratio;
  };
  std::vector<Row> rows;
  {
    sql::Stmt st(db, kSelectCompareSides, "migration 3: read compare runs");
    while (st.step()) {
      const std::string base = st.text(1), spec = st.text(2);
      rows.push_back({st.int64(0), ratio(side_number(spec, "tokens_per_s"), side_number(base, "tokens_per_s")),
                      ratio(side_number(base, "total_ms"), side_number(spec, "total_ms"))});
    }
  }
  for (const Row& r : rows) {
    sql::Stmt st(db, kUpdateCompareRatios, "migration 3: update compare run");
    st.bind(1, r.id).bind_real(2, r.speedup).bind_real(3, r.total_time_ratio).run();
  }
}

void apply_v4(sqlite3* db) { sql::exec(db, kSchemaV4, "migration 4 (messages.finish)"); }

void apply_v6(sqlite3* db) { sql::exec(db, kSchemaV6, "migration 6 (bench_runs)"); }
void apply_v7(sqlite3* db) { sql::exec(db, kSchemaV7, "migration 7 (message_latents)"); }

void apply_v5(sqlite3* db) {
  sql::exec(db, kSchemaV5Column, "migration 5 (messages.parent_id)");
  std::vector<std::vector<Message>> conversations;
  {
    sql::Stmt st(db, kSelectMessagePlaces, "migration 5: read messages");
    while (st.step()) {
      Message m;
      m.id = st.int64(0);
      m.conversation_id = st.int64(1);
      m.role = st.text(2);
      m.active = st.int64(3) != 0;
      if (conversations.empty() || conversations.back().front().conversation_id != m.conversation_id)
        conversations.emplace_back();
      conversations.back().push_back(std::move(m));
    }
  }
  sql::Stmt update(db, kUpdateParent, "migration 5: set parent");  // prepared once: histories are long
  for (std::vector<Message>& ms : conversations) {
    branches::infer_legacy_parents(ms);
    for (const Message& m : ms) {
      if (m.parent_id == 0) continue;
      update.bind(1, m.id).bind(2, m.parent_id).run();
      update.reset();
    }
  }
  sql::exec(db, kSchemaV5Indexes, "migration 5 (branch indexes)");
}

int64_t select_int(sqlite3* db, const char* query) {
  sql::Stmt st(db, query, query);
  return st.step() ? st.int64(0) : 0;
}

struct FileIdentity {
  int user_version = 0;
  int64_t application_id = 0;
  int64_t n_schema_objects = 0;
};

FileIdentity file_identity(sqlite3* db) {
  sql::Stmt st(db, kSelectFileIdentity, "read database identity");
  FileIdentity id;
  if (st.step()) {
    id.user_version = static_cast<int>(st.int64(0));
    id.application_id = st.int64(1);
    id.n_schema_objects = st.int64(2);
  }
  return id;
}

// PRAGMA user_version = N takes no bound parameter, so the statement is built from the integer.
void set_user_version(sqlite3* db, int version) {
  const std::string q = "PRAGMA user_version = " + std::to_string(version);
  sql::exec(db, q.c_str(), "PRAGMA user_version = N");
}

void check_foreign_keys(sqlite3* db) {
  sql::Stmt st(db, kForeignKeyCheck, kForeignKeyCheck);
  if (st.step())
    throw StorageError("sql", "migration left a row in table '" + st.text(0) +
                                  "' whose foreign key points nowhere; migration rolled back");
}

[[noreturn]] void throw_newer(const std::string& path, int found) {
  throw StorageError("newer_schema",
                     "database " + path + " has schema version " + std::to_string(found) +
                         ", newer than version " + std::to_string(latest_version()) +
                         " that this SpecChat build understands; open it with a newer SpecChat "
                         "(the file was left unchanged)");
}

}  // namespace

const std::vector<Step>& steps() {
  static const std::vector<Step> kSteps = {
      {1, "initial schema: conversations, messages, generations, models", apply_v1},
      {2, "compare_runs: saved baseline vs speculative comparisons", apply_v2},
      {3, "compare_runs: speedup is the decode tokens/s ratio, total_time_ratio beside it", apply_v3},
      {4, "messages.finish: why each reply ended", apply_v4},
      {5, "messages.parent_id: branches as a tree, one chosen alternative per place", apply_v5},
      {6, "bench_runs: saved runs of the Benchmark view", apply_v6},
      {7, "message_latents: PIPO replies' pair sequences (latent-format history)", apply_v7},
  };
  return kSteps;
}

int latest_version() { return steps().back().version; }

int user_version(sqlite3* db) { return static_cast<int>(select_int(db, kSelectUserVersion)); }

void check_compatible(sqlite3* db, const std::string& path) {
  const FileIdentity id = file_identity(db);
  const int v = id.user_version;
  if (v > latest_version()) throw_newer(path, v);
  const int64_t app = id.application_id;
  if ((app != 0 && app != kApplicationId) || (v == 0 && id.n_schema_objects > 0))
    throw StorageError("foreign_database",
                       "database " + path +
                           " belongs to another program (application_id " + std::to_string(app) +
                           ", schema version " + std::to_string(v) + "); it was left unchanged");
}

void migrate(sqlite3* db, const std::string& path) {
  if (user_version(db) == latest_version()) return;
  sql::Transaction tx(db);
  const int v = user_version(db);  // re-read under the write lock: another connection may have won
  if (v > latest_version()) throw_newer(path, v);
  int expected = 1;
  for (const Step& s : steps()) {
    if (s.version != expected++)
      throw StorageError("sql", "migration steps are not numbered 1, 2, ... (bug in this build)");
    if (s.version <= v) continue;
    s.apply(db);
    set_user_version(db, s.version);
  }
  check_foreign_keys(db);
  tx.commit();
}

}  // namespace specchat::migrations
