// ConversationStore: search, generations, models, compare runs and import (see
// conversation_store.h). Same rules as conversation_store.cpp: each SQL statement a named
// constant used by one small function, every write one BEGIN IMMEDIATE transaction.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "storage/branches.h"
#include "storage/conversation_store.h"
#include "storage/rows.h"
#include "storage/sql.h"

namespace specchat {
namespace {

// ---- shared checks ------------------------------------------------------------------------

// Throws StorageError "invalid" unless `text` is empty or one valid JSON value.
void check_json(const char* field, const std::string& text) {
  if (text.empty()) return;
  if (!nlohmann::json::accept(text))
    throw StorageError("invalid", std::string(field) + " is not valid JSON");
}

// Empty JSON fields are stored as NULL ("not recorded") and read back as "".
void bind_json(sql::Stmt& st, int i, const std::string& text) {
  if (text.empty()) st.bind_null(i);
  else st.bind(i, text);
}

// ---- search -------------------------------------------------------------------------------

// LIKE is case-insensitive for ASCII only (SQLite without ICU), which is what the sidebar's
// search promises. '\' escapes the pattern characters of the user's text.
constexpr const char* kSearchConversations =
    "SELECT " SPECCHAT_CONVERSATION_COLUMNS " FROM conversations AS c "
    "WHERE c.title LIKE ?1 ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages AS m "
    "WHERE m.conversation_id = c.id AND m.text LIKE ?1 ESCAPE '\\') "
    "ORDER BY c.updated_ms DESC, c.id DESC";

// "%<text with %, _ and \ escaped>%": the user's text matched literally as a substring.
std::string like_substring_pattern(const std::string& text) {
  std::string p = "%";
  for (char ch : text) {
    if (ch == '%' || ch == '_' || ch == '\\') p += '\\';
    p += ch;
  }
  p += '%';
  return p;
}

// ---- generations --------------------------------------------------------------------------

constexpr const char* kMessageExists = "SELECT 1 FROM messages WHERE id = ?1";
constexpr const char* kInsertGeneration =
    "INSERT INTO generations (message_id, mode, params_json, stats_json, accepted_hist_json, "
    "created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kSelectGenerations =
    "SELECT id, message_id, mode, params_json, stats_json, accepted_hist_json, created_ms "
    "FROM generations WHERE message_id = ?1 ORDER BY id";

bool message_exists(sqlite3* db, int64_t message_id) {
  sql::Stmt st(db, kMessageExists, "message exists");
  st.bind(1, message_id);
  return st.step();
}

void validate_generation(const GenerationRecord& g) {
  if (g.mode.empty()) throw StorageError("invalid", "generation mode is empty");
  check_json("generation params_json", g.params_json);
  check_json("generation stats_json", g.stats_json);
  for (size_t i = 0; i < g.accepted_hist.size(); ++i)
    if (g.accepted_hist[i] < 0)
      throw StorageError("invalid", "accepted_hist[" + std::to_string(i) + "] is negative");
}

int64_t insert_generation(sqlite3* db, int64_t message_id, const GenerationRecord& g) {
  sql::Stmt st(db, kInsertGeneration, "insert generation");
  st.bind(1, message_id).bind(2, g.mode);
  bind_json(st, 3, g.params_json);
  bind_json(st, 4, g.stats_json);
  st.bind(5, nlohmann::json(g.accepted_hist).dump());
  st.bind(6, g.created_ms ? g.created_ms : sql::now_ms()).run();
  return sqlite3_last_insert_rowid(db);
}

// A histogram that is not an array of integers (tampered row) reads as empty: it is a summary,
// not something a context is rebuilt from.
std::vector<int> hist_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<int> out;
  if (!j.is_array()) return out;
  for (const auto& v : j) {
    if (!v.is_number_integer()) return {};
    out.push_back(v.get<int>());
  }
  return out;
}

GenerationRecord read_generation(const sql::Stmt& st) {
  GenerationRecord g;
  g.id = st.int64(0);
  g.message_id = st.int64(1);
  g.mode = st.text(2);
  g.params_json = st.text(3);
  g.stats_json = st.text(4);
  g.accepted_hist = hist_from_json(st.text(5));
  g.created_ms = st.int64(6);
  return g;
}

// ---- models -------------------------------------------------------------------------------

// RETURNING gives the row's id on the update path too (last_insert_rowid does not).
constexpr const char* kUpsertModel =
    "INSERT INTO models (path, sha256, size_bytes, architecture) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, size_bytes = excluded.size_bytes, "
    "architecture = excluded.architecture RETURNING id";
constexpr const char* kSelectModelByPath =
    "SELECT id, path, sha256, size_bytes, architecture FROM models WHERE path = ?1";

int64_t upsert_model_row(sqlite3* db, const ModelRecord& m) {
  sql::Stmt st(db, kUpsertModel, "upsert model");
  st.bind(1, m.path).bind(2, m.sha256).bind(3, m.size_bytes).bind(4, m.architecture);
  if (!st.step()) throw StorageError("sql", "upsert model: no id returned");
  const int64_t id = st.int64(0);
  while (st.step()) {}  // finish the statement so the transaction can commit
  return id;
}

// ---- compare runs -------------------------------------------------------------------------

constexpr const char* kConversationExists = "SELECT 1 FROM conversations WHERE id = ?1";
constexpr const char* kInsertCompareRun =
    "INSERT INTO compare_runs (conversation_id, created_ms, prompt, params_json, baseline_json, "
    "speculative_json, speedup, identical, first_diff, total_time_ratio) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
#define SPECCHAT_COMPARE_COLUMNS                                                                \
  "SELECT id, conversation_id, created_ms, prompt, params_json, baseline_json, speculative_json, " \
  "speedup, identical, first_diff, total_time_ratio FROM compare_runs "
constexpr const char* kSelectAllCompareRuns = SPECCHAT_COMPARE_COLUMNS "ORDER BY id DESC";
constexpr const char* kSelectCompareRunsOf =
    SPECCHAT_COMPARE_COLUMNS "WHERE conversation_id = ?1 ORDER BY id DESC";
#undef SPECCHAT_COMPARE_COLUMNS

bool conversation_exists(sqlite3* db, int64_t id) {
  sql::Stmt st(db, kConversationExists, "conversation exists");
  st.bind(1, id);
  return st.step();
}

void validate_compare(const CompareRecord& r) {
  if (r.identical != (r.first_diff == -1) || r.first_diff < -1)
    throw StorageError("invalid", "compare run: first_diff " + std::to_string(r.first_diff) +
                                      " with identical = " + (r.identical ? "true" : "false") +
                                      " (must be -1 exactly when identical)");
  if (!std::isfinite(r.speedup) || r.speedup < 0)
    throw StorageError("invalid", "compare run: speedup " + std::to_string(r.speedup) +
                                      " is not a finite non-negative number");
  if (!std::isfinite(r.total_time_ratio) || r.total_time_ratio < 0)
    throw StorageError("invalid", "compare run: total_time_ratio " + std::to_string(r.total_time_ratio) +
                                      " is not a finite non-negative number");
  check_json("compare params_json", r.params_json);
  check_json("compare baseline_json", r.baseline_json);
  check_json("compare speculative_json", r.speculative_json);
}

int64_t insert_compare_run(sqlite3* db, const CompareRecord& r) {
  sql::Stmt st(db, kInsertCompareRun, "insert compare run");
  if (r.conversation_id) st.bind(1, *r.conversation_id);
  else st.bind_null(1);
  st.bind(2, r.created_ms ? r.created_ms : sql::now_ms()).bind(3, r.prompt);
  bind_json(st, 4, r.params_json);
  bind_json(st, 5, r.baseline_json);
  bind_json(st, 6, r.speculative_json);
  st.bind_real(7, r.speedup).bind(8, int64_t{r.identical ? 1 : 0}).bind(9, r.first_diff);
  st.bind_real(10, r.total_time_ratio).run();
  return sqlite3_last_insert_rowid(db);
}

CompareRecord read_compare_run(const sql::Stmt& st) {
  CompareRecord r;
  r.id = st.int64(0);
  if (!st.is_null(1)) r.conversation_id = st.int64(1);
  r.created_ms = st.int64(2);
  r.prompt = st.text(3);
  r.params_json = st.text(4);
  r.baseline_json = st.text(5);
  r.speculative_json = st.text(6);
  r.speedup = st.real(7);
  r.identical = st.int64(8) != 0;
  r.first_diff = st.int64(9);
  r.total_time_ratio = st.real(10);
  return r;
}

// ---- import -------------------------------------------------------------------------------

constexpr const char* kInsertConversationWithTimes =
    "INSERT INTO conversations (title, system_prompt, created_ms, updated_ms) "
    "VALUES (?1, ?2, ?3, ?4)";

int64_t insert_conversation_with_times(sqlite3* db, const Conversation& c) {
  const int64_t now = sql::now_ms();
  sql::Stmt st(db, kInsertConversationWithTimes, "import conversation");
  st.bind(1, c.title).bind(2, c.system_prompt);
  st.bind(3, c.created_ms ? c.created_ms : now).bind(4, c.updated_ms ? c.updated_ms : now).run();
  return sqlite3_last_insert_rowid(db);
}

}  // namespace

std::vector<Conversation> ConversationStore::search_conversations(const std::string& text) const {
  sql::Stmt st(db_, kSearchConversations, "search conversations");
  st.bind(1, like_substring_pattern(text));
  std::vector<Conversation> out;
  while (st.step()) out.push_back(rows::read_conversation(st));
  return out;
}

int64_t ConversationStore::record_generation(int64_t message_id, const GenerationRecord& g) {
  validate_generation(g);
  sql::Transaction tx(db_);
  if (!message_exists(db_, message_id))
    throw StorageError("not_found", "record generation: no message " + std::to_string(message_id));
  const int64_t id = insert_generation(db_, message_id, g);
  tx.commit();
  return id;
}

std::vector<GenerationRecord> ConversationStore::generations(int64_t message_id) const {
  sql::Stmt st(db_, kSelectGenerations, "select generations");
  st.bind(1, message_id);
  std::vector<GenerationRecord> out;
  while (st.step()) out.push_back(read_generation(st));
  return out;
}

int64_t ConversationStore::upsert_model(const ModelRecord& m) {
  if (m.path.empty()) throw StorageError("invalid", "model path is empty");
  if (m.size_bytes < 0)
    throw StorageError("invalid", "model size " + std::to_string(m.size_bytes) + " is negative");
  sql::Transaction tx(db_);
  const int64_t id = upsert_model_row(db_, m);
  tx.commit();
  return id;
}

std::optional<ModelRecord> ConversationStore::model_by_path(const std::string& path) const {
  sql::Stmt st(db_, kSelectModelByPath, "select model");
  st.bind(1, path);
  if (!st.step()) return std::nullopt;
  ModelRecord m;
  m.id = st.int64(0);
  m.path = st.text(1);
  m.sha256 = st.text(2);
  m.size_bytes = st.int64(3);
  m.architecture = st.text(4);
  return m;
}

int64_t ConversationStore::save_compare_run(const CompareRecord& r) {
  validate_compare(r);
  sql::Transaction tx(db_);
  if (r.conversation_id && !conversation_exists(db_, *r.conversation_id))
    throw StorageError("not_found", "save compare run: no conversation " +
                                        std::to_string(*r.conversation_id));
  const int64_t id = insert_compare_run(db_, r);
  tx.commit();
  return id;
}

std::vector<CompareRecord> ConversationStore::compare_runs(std::optional<int64_t> conversation_id) const {
  sql::Stmt st(db_, conversation_id ? kSelectCompareRunsOf : kSelectAllCompareRuns,
               "select compare runs");
  if (conversation_id) st.bind(1, *conversation_id);
  std::vector<CompareRecord> out;
  while (st.step()) out.push_back(read_compare_run(st));
  return out;
}

int64_t ConversationStore::import_conversation(const Conversation& c, const std::vector<Message>& all_messages,
                                               const std::map<int64_t, MessageLatents>& latents) {
  // Before taking the lock: each message, then the tree. A list without ids (every id and
  // parent 0) is a flat list as stored before schema 5, given its parents the same way.
  for (const Message& m : all_messages) rows::validate_message(m);
  std::vector<Message> tree = all_messages;
  const bool flat = std::all_of(tree.begin(), tree.end(), [](const Message& m) { return m.id == 0 && m.parent_id == 0; });
  if (flat) {
    for (size_t i = 0; i < tree.size(); ++i) tree[i].id = static_cast<int64_t>(i) + 1;
    branches::infer_legacy_parents(tree);
  }
  branches::validate_tree(tree);
  sql::Transaction tx(db_);
  const int64_t id = insert_conversation_with_times(db_, c);
  std::unordered_map<int64_t, int64_t> new_id;  // id in `tree` -> stored id
  for (const Message& m : tree) {
    Message copy = m;
    copy.conversation_id = id;
    copy.parent_id = m.parent_id == 0 ? 0 : new_id.at(m.parent_id);  // validate_tree: an earlier one
    new_id[m.id] = rows::insert_message(db_, copy);
  }
  for (const auto& [mid, l] : latents) {
    const auto it = new_id.find(mid);
    if (it == new_id.end()) throw StorageError("invalid", "latents for message " + std::to_string(mid) + ", not in the list");
    rows::upsert_latents(db_, it->second, l);
  }
  tx.commit();
  return id;
}

}  // namespace specchat
