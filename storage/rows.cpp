// Row encoding shared by storage/*.cpp (see rows.h).
#include "storage/rows.h"

#include <cmath>
#include <stdexcept>

#include "storage/sql.h"

namespace specchat {
namespace rows {

// token_ids BLOB: pair-aligned ids, each int32 little-endian (explicit bytes, so the file reads
// the same on any host).
std::vector<uint8_t> encode_ids(const std::vector<int32_t>& padded) {
  std::vector<uint8_t> out;
  out.reserve(padded.size() * 4);
  for (int32_t id : padded) {
    const auto u = static_cast<uint32_t>(id);
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(u >> (8 * b)));
  }
  return out;
}

std::vector<int32_t> decode_ids(const std::vector<uint8_t>& blob) {
  std::vector<int32_t> out(blob.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= static_cast<uint32_t>(blob[4 * i + b]) << (8 * b);
    out[i] = static_cast<int32_t>(u);
  }
  return out;
}

namespace {

constexpr const char* kInsertMessage =
    "INSERT INTO messages (conversation_id, role, text, token_ids, raw_len, latent_len, n_tokens, "
    "drafted, tokenizer_hash, template_name, stats_json, created_ms, active, finish, parent_id) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)";
#define SPECCHAT_MESSAGE_COLUMNS                                                          \
  "SELECT id, conversation_id, role, text, token_ids, raw_len, latent_len, n_tokens, drafted, " \
  "tokenizer_hash, template_name, stats_json, created_ms, active, finish, parent_id FROM messages "
// The active path (branches.h): the chosen first message, then the chosen child of each one. The
// unique index messages_one_active allows one chosen child per parent, so this is a chain; a
// child's id is above its parent's (inserted later, or moved up to an older parent by
// delete_message), so id order is path order.
constexpr const char* kSelectActiveMessages =
    "WITH RECURSIVE path(id) AS ("
    " SELECT id FROM messages WHERE conversation_id = ?1 AND parent_id IS NULL AND active = 1"
    " UNION ALL SELECT m.id FROM messages m JOIN path p ON m.parent_id = p.id WHERE m.active = 1) "
    SPECCHAT_MESSAGE_COLUMNS "WHERE id IN path ORDER BY id";
constexpr const char* kSelectAllMessages =
    SPECCHAT_MESSAGE_COLUMNS "WHERE conversation_id = ?1 ORDER BY id";
#undef SPECCHAT_MESSAGE_COLUMNS

// Reads one row of kSelect*Messages. Throws StorageError "corrupt" when the token blob breaks
// the invariants it was written with (tampered file): silently dropping ids would bring back
// re-tokenization drift.
Message read_message(const sql::Stmt& st) {
  Message m;
  m.id = st.int64(0);
  m.conversation_id = st.int64(1);
  m.role = st.text(2);
  m.text = st.text(3);
  const std::vector<uint8_t> blob = st.blob(4);
  const int64_t raw_len = st.int64(5), latent_len = st.int64(6);
  try {
    if (blob.size() % 8 != 0 || static_cast<int64_t>(blob.size()) != 8 * latent_len)
      throw std::invalid_argument("blob is not latent_len pairs of int32");
    m.token_ids = pair_unalign(decode_ids(blob));
    if (static_cast<int64_t>(m.token_ids.size()) != raw_len)
      throw std::invalid_argument("raw_len does not match the ids");
  } catch (const std::invalid_argument& e) {
    throw StorageError("corrupt", "message " + std::to_string(m.id) + " token_ids: " + e.what());
  }
  m.drafted = st.blob(8);
  m.tokenizer_hash = static_cast<uint64_t>(st.int64(9));
  m.template_name = st.text(10);
  if (!st.is_null(11)) m.stats = stats_from_json(st.text(11));
  m.stats.n_tokens = static_cast<int>(st.int64(7));
  m.created_ms = st.int64(12);
  m.active = st.int64(13) != 0;
  m.finish = st.text(14);
  m.parent_id = st.is_null(15) ? 0 : st.int64(15);
  return m;
}

}  // namespace

Conversation read_conversation(const sql::Stmt& st) {
  Conversation c;
  c.id = st.int64(0);
  c.title = st.text(1);
  c.system_prompt = st.text(2);
  c.created_ms = st.int64(3);
  c.updated_ms = st.int64(4);
  return c;
}

nlohmann::json stats_to_json(const MessageStats& s) {
  // Non-finite rates (a zero-length generation) would become JSON null; store 0 instead.
  auto num = [](double v) { return std::isfinite(v) ? v : 0.0; };
  return {{"mode", s.mode},
          {"n_tokens", s.n_tokens},
          {"tokens_per_s", num(s.tokens_per_s)},
          {"ttft_ms", num(s.ttft_ms)},
          {"acceptance_rate", num(s.acceptance_rate)},
          {"mean_accepted_length", num(s.mean_accepted_length)},
          {"n_drafted", s.n_drafted},
          {"n_accepted", s.n_accepted}};
}

MessageStats stats_from_json(const std::string& text) {
  MessageStats s;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return s;
  auto num = [&](const char* k, double def) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>() : def;
  };
  if (auto it = j.find("mode"); it != j.end() && it->is_string()) s.mode = it->get<std::string>();
  s.n_tokens = static_cast<int>(num("n_tokens", 0));
  s.tokens_per_s = num("tokens_per_s", 0);
  s.ttft_ms = num("ttft_ms", 0);
  s.acceptance_rate = num("acceptance_rate", 0);
  s.mean_accepted_length = num("mean_accepted_length", 0);
  s.n_drafted = static_cast<int>(num("n_drafted", 0));
  s.n_accepted = static_cast<int>(num("n_accepted", 0));
  return s;
}

void validate_message(const Message& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant")
    throw StorageError("invalid", "message role '" + m.role + "' is not system, user or assistant");
  if (!m.drafted.empty() && m.drafted.size() != m.token_ids.size())
    throw StorageError("invalid", "drafted has " + std::to_string(m.drafted.size()) +
                                      " entries for " + std::to_string(m.token_ids.size()) +
                                      " tokens (must be one per token, or none)");
  for (size_t i = 0; i < m.drafted.size(); ++i)
    if (m.drafted[i] > 1)
      throw StorageError("invalid", "drafted[" + std::to_string(i) + "] is " +
                                        std::to_string(m.drafted[i]) + " (must be 0 or 1)");
  if (!is_finish_reason(m.finish))
    throw StorageError("invalid", "finish reason '" + m.finish +
                                      "' is not length, eos, stop, cancelled, context_full or empty");
}

int64_t insert_message(sqlite3* db, const Message& m) {
  validate_message(m);
  std::vector<int32_t> padded;
  try {
    padded = pair_align(m.token_ids);
  } catch (const std::invalid_argument& e) {
    throw StorageError("invalid", std::string("token ids: ") + e.what());
  }
  const auto raw_len = static_cast<int64_t>(m.token_ids.size());
  const auto latent_len = static_cast<int64_t>(padded.size() / 2);
  sql::Stmt st(db, kInsertMessage, "insert message");
  st.bind(1, m.conversation_id).bind(2, m.role).bind(3, m.text);
  st.bind_blob(4, encode_ids(padded)).bind(5, raw_len).bind(6, latent_len);
  st.bind(7, static_cast<int64_t>(m.stats.n_tokens)).bind_blob(8, m.drafted);
  st.bind(9, static_cast<int64_t>(m.tokenizer_hash)).bind(10, m.template_name);  // bit-for-bit
  st.bind(11, stats_to_json(m.stats).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  st.bind(12, m.created_ms ? m.created_ms : sql::now_ms());
  st.bind(13, int64_t{m.active ? 1 : 0}).bind(14, m.finish);
  if (m.parent_id != 0)
    st.bind(15, m.parent_id);
  else
    st.bind_null(15);
  st.run();
  return sqlite3_last_insert_rowid(db);
}

std::vector<Message> select_messages(sqlite3* db, int64_t conversation_id, bool active_only) {
  sql::Stmt st(db, active_only ? kSelectActiveMessages : kSelectAllMessages, "select messages");
  st.bind(1, conversation_id);
  std::vector<Message> out;
  while (st.step()) out.push_back(read_message(st));
  return out;
}

}  // namespace rows

// ---- pair alignment -----------------------------------------------------------------------

std::vector<int32_t> pair_align(const std::vector<int32_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0)
      throw std::invalid_argument("token id " + std::to_string(ids[i]) + " at " +
                                  std::to_string(i) + " is negative");
  std::vector<int32_t> out;
  out.reserve(ids.size() + 1);
  out.assign(ids.begin(), ids.end());
  if (out.size() % 2 != 0) out.push_back(kPairPad);
  return out;
}

std::vector<int32_t> pair_unalign(const std::vector<int32_t>& padded) {
  if (padded.size() % 2 != 0)
    throw std::invalid_argument("padded length " + std::to_string(padded.size()) + " is odd");
  std::vector<int32_t> out = padded;
  if (!out.empty() && out.back() == kPairPad) out.pop_back();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] < 0)
      throw std::invalid_argument("value " + std::to_string(out[i]) + " at " + std::to_string(i) +
                                  " is negative and not the final pad");
  return out;
}

}  // namespace specchat
