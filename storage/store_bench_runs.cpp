// ConversationStore's saved benchmark runs (conversation_store.h, schema 6 `bench_runs`).
// Same rules as conversation_store.cpp: each SQL statement a named constant, every write one
// BEGIN IMMEDIATE transaction.
#include <nlohmann/json.hpp>

#include "storage/conversation_store.h"
#include "storage/sql.h"

namespace specchat {
namespace {

constexpr const char* kInsertBenchRun =
    "INSERT INTO bench_runs (created_ms, title, suite, n_records, failures, report_json) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kListBenchRuns =
    "SELECT id, created_ms, title, suite, n_records, failures FROM bench_runs ORDER BY created_ms DESC, id DESC";
constexpr const char* kSelectBenchRun =
    "SELECT id, created_ms, title, suite, n_records, failures, report_json FROM bench_runs WHERE id = ?1";
constexpr const char* kDeleteBenchRun = "DELETE FROM bench_runs WHERE id = ?1";

BenchRunRecord read_summary(const sql::Stmt& st) {
  BenchRunRecord r;
  r.id = st.int64(0);
  r.created_ms = st.int64(1);
  r.title = st.text(2);
  r.suite = st.text(3);
  r.n_records = st.int64(4);
  r.failures = st.int64(5);
  return r;
}

}  // namespace

int64_t ConversationStore::save_bench_run(const BenchRunRecord& r) {
  if (r.n_records < 0 || r.failures < 0) throw StorageError("invalid", "bench run: negative request counts");
  const nlohmann::json doc = nlohmann::json::parse(r.report_json, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) throw StorageError("invalid", "bench run: report_json is not a JSON object");
  sql::Transaction tx(db_);
  sql::Stmt st(db_, kInsertBenchRun, "insert bench run");
  st.bind(1, r.created_ms ? r.created_ms : sql::now_ms()).bind(2, r.title).bind(3, r.suite);
  st.bind(4, r.n_records).bind(5, r.failures).bind(6, r.report_json).run();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::vector<BenchRunRecord> ConversationStore::bench_runs() const {
  sql::Stmt st(db_, kListBenchRuns, "list bench runs");
  std::vector<BenchRunRecord> out;
  while (st.step()) out.push_back(read_summary(st));
  return out;
}

std::optional<BenchRunRecord> ConversationStore::bench_run(int64_t id) const {
  sql::Stmt st(db_, kSelectBenchRun, "select bench run");
  st.bind(1, id);
  if (!st.step()) return std::nullopt;
  BenchRunRecord r = read_summary(st);
  r.report_json = st.text(6);
  return r;
}

void ConversationStore::delete_bench_run(int64_t id) {
  sql::Transaction tx(db_);
  sql::Stmt st(db_, kDeleteBenchRun, "delete bench run");
  st.bind(1, id).run();
  tx.commit();
}

}  // namespace specchat
