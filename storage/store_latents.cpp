// ConversationStore's PIPO latent-format history (conversation_store.h, schema 7
// `message_latents`, docs/design/pipo.md). Same rules as conversation_store.cpp: each SQL
// statement a named constant, every write one BEGIN IMMEDIATE transaction.
#include <algorithm>

#include "storage/conversation_store.h"
#include "storage/rows.h"
#include "storage/sql.h"

namespace specchat {
namespace {

constexpr const char* kMessageExists = "SELECT 1 FROM messages WHERE id = ?1";
constexpr const char* kUpsertLatents =
    "INSERT INTO message_latents (message_id, release, pairs, raw_len) VALUES (?1, ?2, ?3, ?4) "
    "ON CONFLICT(message_id) DO UPDATE SET release = excluded.release, pairs = excluded.pairs, raw_len = excluded.raw_len";
constexpr const char* kSelectLatents = "SELECT release, pairs, raw_len FROM message_latents WHERE message_id = ?1";
constexpr const char* kSelectConversationLatents =
    "SELECT l.message_id, l.release, l.pairs, l.raw_len FROM message_latents l JOIN messages m ON m.id = l.message_id "
    "WHERE m.conversation_id = ?1 ORDER BY l.message_id";

int64_t raw_length(const std::vector<int32_t>& pairs) {
  return static_cast<int64_t>(std::count_if(pairs.begin(), pairs.end(), [](int32_t t) { return t != kPairPad; }));
}

// Reads one row's release, pairs blob and raw_len from columns `col`.. of `st`. Throws
// StorageError "corrupt" when they break the invariants.
MessageLatents read_latents(const sql::Stmt& st, int col, int64_t message_id) {
  MessageLatents l;
  l.release = st.text(col);
  const std::vector<uint8_t> blob = st.blob(col + 1);
  l.pairs = rows::decode_ids(blob);
  const std::string bad = blob.size() % 4 != 0 ? std::string("a blob of partial ids") : rows::latent_pairs_problem(l.pairs);
  if (!bad.empty() || raw_length(l.pairs) != st.int64(col + 2)) {
    throw StorageError("corrupt", "message " + std::to_string(message_id) + " latents: " + (bad.empty() ? "raw_len disagrees" : bad));
  }
  return l;
}

}  // namespace

namespace rows {

std::string latent_pairs_problem(const std::vector<int32_t>& pairs) {
  if (pairs.empty() || pairs.size() % 2 != 0) return "pairs must be a non-empty even number of ids";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i] >= 0) continue;
    if (pairs[i] != kPairPad) return "id " + std::to_string(pairs[i]) + " at " + std::to_string(i) + " is negative";
    if (i % 2 == 0) return "PAD in a pair's first slot at " + std::to_string(i);
  }
  return "";
}

void upsert_latents(sqlite3* db, int64_t message_id, const MessageLatents& l) {
  if (l.release.empty()) throw StorageError("invalid", "message latents: empty release");
  if (const std::string bad = latent_pairs_problem(l.pairs); !bad.empty()) {
    throw StorageError("invalid", "message latents: " + bad);
  }
  {
    sql::Stmt ex(db, kMessageExists, "message exists");
    ex.bind(1, message_id);
    if (!ex.step()) throw StorageError("not_found", "message latents: no message " + std::to_string(message_id));
  }
  sql::Stmt st(db, kUpsertLatents, "store message latents");
  st.bind(1, message_id).bind(2, l.release).bind_blob(3, encode_ids(l.pairs)).bind(4, raw_length(l.pairs)).run();
}

}  // namespace rows

void ConversationStore::set_message_latents(int64_t message_id, const MessageLatents& l) {
  sql::Transaction tx(db_);
  rows::upsert_latents(db_, message_id, l);
  tx.commit();
}

std::optional<MessageLatents> ConversationStore::message_latents(int64_t message_id) const {
  sql::Stmt st(db_, kSelectLatents, "select message latents");
  st.bind(1, message_id);
  if (!st.step()) return std::nullopt;
  return read_latents(st, 0, message_id);
}

std::map<int64_t, MessageLatents> ConversationStore::conversation_latents(int64_t conversation_id) const {
  sql::Stmt st(db_, kSelectConversationLatents, "select conversation latents");
  st.bind(1, conversation_id);
  std::map<int64_t, MessageLatents> out;
  while (st.step()) {
    const int64_t id = st.int64(0);
    out.emplace(id, read_latents(st, 1, id));
  }
  return out;
}

}  // namespace specchat
