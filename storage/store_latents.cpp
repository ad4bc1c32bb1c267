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

// Empty string when `pairs` is a valid pair sequence, else what is wrong.
std::string check_pairs(const std::vector<int32_t>& pairs) {
  if (pairs.empty() || pairs.size() % 2 != 0) return "pairs must be a non-empty even number of ids";
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i] >= 0) continue;
    if (pairs[i] != kPairPad) return "id " + std::to_string(pairs[i]) + " at " + std::to_string(i) + " is negative";
    if (i % 2 == 0) return "PAD in a pair's first slot at " + std::to_string(i);
  }
  return "";
}

}  // namespace

void ConversationStore::set_message_latents(int64_t message_id, const MessageLatents& l) {
  if (l.release.empty()) throw StorageError("invalid", "message latents: empty release");
  if (const std::string bad = check_pairs(l.pairs); !bad.empty()) throw StorageError("invalid", "message latents: " + bad);
  const auto raw_len = static_cast<int64_t>(std::count_if(l.pairs.begin(), l.pairs.end(), [](int32_t t) { return t != kPairPad; }));
  sql::Transaction tx(db_);
  {
    sql::Stmt ex(db_, kMessageExists, "message exists");
    ex.bind(1, message_id);
    if (!ex.step()) throw StorageError("not_found", "message latents: no message " + std::to_string(message_id));
  }
  sql::Stmt st(db_, kUpsertLatents, "store message latents");
  st.bind(1, message_id).bind(2, l.release).bind_blob(3, rows::encode_ids(l.pairs)).bind(4, raw_len).run();
  tx.commit();
}

std::optional<MessageLatents> ConversationStore::message_latents(int64_t message_id) const {
  sql::Stmt st(db_, kSelectLatents, "select message latents");
  st.bind(1, message_id);
  if (!st.step()) return std::nullopt;
  MessageLatents l;
  l.release = st.text(0);
  const std::vector<uint8_t> blob = st.blob(1);
  l.pairs = rows::decode_ids(blob);
  const std::string bad = blob.size() % 4 != 0 ? std::string("a blob of partial ids") : check_pairs(l.pairs);
  const auto raw_len = static_cast<int64_t>(std::count_if(l.pairs.begin(), l.pairs.end(), [](int32_t t) { return t != kPairPad; }));
  if (!bad.empty() || raw_len != st.int64(2)) {
    throw StorageError("corrupt", "message " + std::to_string(message_id) + " latents: " + (bad.empty() ? "raw_len disagrees" : bad));
  }
  return l;
}

}  // namespace specchat
