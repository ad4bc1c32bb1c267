// Internal to storage/: row encoding shared by conversation_store.cpp, store_records.cpp and
// export.cpp: conversation rows, message rows (token-id blobs, stats JSON), insert and select.
// Callers hold the transaction; these functions only run statements.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "storage/conversation_store.h"
#include "storage/sql.h"

namespace specchat::rows {

// Token-id blobs: each int32 little-endian (explicit bytes, so a file reads the same on any host).
std::vector<uint8_t> encode_ids(const std::vector<int32_t>& ids);
std::vector<int32_t> decode_ids(const std::vector<uint8_t>& blob);  // blob.size() / 4 ids

// Columns of a conversation row in the order read_conversation() expects, for SELECT lists.
#define SPECCHAT_CONVERSATION_COLUMNS "id, title, system_prompt, created_ms, updated_ms"
Conversation read_conversation(const sql::Stmt& st);

// Message stats as stored in messages.stats_json and exported (same keys as MessageStats).
// Non-finite rates are written as 0 (JSON has no NaN).
nlohmann::json stats_to_json(const MessageStats& s);
// Lenient: a missing or malformed field reads as its default (stats are informational and must
// not make a stored conversation unreadable).
MessageStats stats_from_json(const std::string& text);

// Throws StorageError "invalid" when m breaks the store's rules: role not system/user/assistant,
// a negative token id, drafted neither empty nor one 0/1 entry per token, a finish reason that
// is_finish_reason() refuses.
void validate_message(const Message& m);

// Validates m, then inserts one row into m.conversation_id (created_ms 0 = now; parent_id 0 =
// NULL, the first place) with m's parent and active flag as given. Returns the new id. Throws StorageError ("invalid", or "sql" when the conversation does not exist).
int64_t insert_message(sqlite3* db, const Message& m);

// The active path (`active_only`: branches.h, walked in SQL) or every message of a
// conversation, in insertion order (for the path, also path order).
// Throws StorageError "corrupt" for a token blob that breaks its invariants.
std::vector<Message> select_messages(sqlite3* db, int64_t conversation_id, bool active_only);

// Empty when `pairs` is a valid PIPO pair sequence (non-empty, even, ids >= 0 except PAD
// kPairPad in second slots), else what is wrong.
std::string latent_pairs_problem(const std::vector<int32_t>& pairs);

// Stores (or replaces) message `message_id`'s latents. Throws StorageError "invalid" (empty
// release, bad pairs) or "not_found" (no such message).
void upsert_latents(sqlite3* db, int64_t message_id, const MessageLatents& l);

}  // namespace specchat::rows
