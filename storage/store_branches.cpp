// ConversationStore's messages and their branch tree (conversation_store.h, branches.h): append
// to the active path, store an alternative, switch branches, delete one message. Every write is
// one BEGIN IMMEDIATE transaction; the unique index messages_one_active (schema 5) refuses a
// second chosen alternative at one place, so a bug here fails loudly instead of forking the path.
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "storage/branches.h"
#include "storage/conversation_store.h"
#include "storage/rows.h"
#include "storage/sql.h"

namespace specchat {
namespace {

constexpr const char* kTouchConversation =
    "UPDATE conversations SET updated_ms = max(updated_ms, ?2) WHERE id = ?1";
constexpr const char* kSelectPlace =
    "SELECT conversation_id, parent_id, active, role FROM messages WHERE id = ?1";
// The last message of the active path (rows.cpp has the same walk for the whole path).
constexpr const char* kSelectPathTail =
    "WITH RECURSIVE path(id) AS ("
    " SELECT id FROM messages WHERE conversation_id = ?1 AND parent_id IS NULL AND active = 1"
    " UNION ALL SELECT m.id FROM messages m JOIN path p ON m.parent_id = p.id WHERE m.active = 1) "
    "SELECT max(id) FROM path";
constexpr const char* kSetActive = "UPDATE messages SET active = ?2 WHERE id = ?1";
// `parent_id IS ?2`: a NULL parameter (the first message's place) matches NULL.
constexpr const char* kClearChosen =
    "UPDATE messages SET active = 0 WHERE conversation_id = ?1 AND parent_id IS ?2 AND active = 1";
constexpr const char* kSelectChildren =
    "SELECT id, active FROM messages WHERE conversation_id = ?1 AND parent_id IS ?2 ORDER BY id";
// Children of a deleted message follow its parent; they stay chosen only where it was chosen.
constexpr const char* kReparentChildren =
    "UPDATE messages SET parent_id = ?2, active = CASE WHEN ?3 = 1 THEN active ELSE 0 END WHERE parent_id = ?1";
constexpr const char* kDeleteMessage = "DELETE FROM messages WHERE id = ?1";

// Where a message sits: its conversation, parent (0 = first message), chosen flag and role.
struct Place {
  int64_t conversation_id = 0;
  int64_t parent_id = 0;
  bool active = false;
  std::string role;
};

std::optional<Place> place_of(sqlite3* db, int64_t message_id) {
  sql::Stmt st(db, kSelectPlace, "select message place");
  st.bind(1, message_id);
  if (!st.step()) return std::nullopt;
  return Place{st.int64(0), st.is_null(1) ? 0 : st.int64(1), st.int64(2) != 0, st.text(3)};
}

// Binds a parent id, 0 (the conversation's first place) as NULL.
void bind_parent(sql::Stmt& st, int i, int64_t parent_id) {
  if (parent_id != 0)
    st.bind(i, parent_id);
  else
    st.bind_null(i);
}

// Sets updated_ms to now; returns false when the conversation does not exist.
bool touch_conversation(sqlite3* db, int64_t id) {
  sql::Stmt st(db, kTouchConversation, "touch conversation");
  st.bind(1, id).bind(2, sql::now_ms()).run();
  return sql::changes(db) > 0;
}

int64_t path_tail(sqlite3* db, int64_t conversation_id) {
  sql::Stmt st(db, kSelectPathTail, "select path tail");
  st.bind(1, conversation_id);
  return st.step() && !st.is_null(0) ? st.int64(0) : 0;
}

void set_active(sqlite3* db, int64_t message_id, bool active) {
  sql::Stmt st(db, kSetActive, "set message active");
  st.bind(1, message_id).bind(2, int64_t{active ? 1 : 0}).run();
}

void clear_chosen(sqlite3* db, int64_t conversation_id, int64_t parent_id) {
  sql::Stmt st(db, kClearChosen, "clear chosen alternative");
  st.bind(1, conversation_id);
  bind_parent(st, 2, parent_id);
  st.run();
}

// From the children of `from` (0: the conversation's first place) down: where a message has
// children but none chosen (a branch stored before schema 5, or whose chosen message was
// deleted), its newest child becomes the chosen one, so the branch shows as far as it was
// stored. Returns how many it chose.
int choose_down(sqlite3* db, int64_t conversation_id, int64_t from) {
  int chosen = 0;
  for (int64_t at = from, first = 1; first || at != 0; first = 0) {
    int64_t next = 0, newest = 0;
    {
      sql::Stmt st(db, kSelectChildren, "select children");
      st.bind(1, conversation_id);
      bind_parent(st, 2, at);
      while (st.step()) {
        newest = st.int64(0);
        if (st.int64(1) != 0) next = newest;
      }
    }
    if (next == 0 && newest != 0) {
      set_active(db, newest, true);
      next = newest;
      ++chosen;
    }
    at = next;
  }
  return chosen;
}

[[noreturn]] void throw_no_conversation(int64_t id) {
  throw StorageError("not_found", "no conversation " + std::to_string(id));
}

[[noreturn]] void throw_no_message(int64_t id) {
  throw StorageError("not_found", "no message " + std::to_string(id));
}

}  // namespace

int64_t ConversationStore::add_message(const Message& m) {
  sql::Transaction tx(db_);
  if (!touch_conversation(db_, m.conversation_id)) throw_no_conversation(m.conversation_id);
  Message copy = m;
  copy.parent_id = path_tail(db_, m.conversation_id);
  copy.active = true;
  const int64_t id = rows::insert_message(db_, copy);
  tx.commit();
  return id;
}

int64_t ConversationStore::add_message_replacing(int64_t replaced_id, const Message& m) {
  sql::Transaction tx(db_);
  const std::optional<Place> at = place_of(db_, replaced_id);
  if (!at) throw_no_message(replaced_id);
  if (m.conversation_id != 0 && m.conversation_id != at->conversation_id)
    throw StorageError("invalid", "message " + std::to_string(replaced_id) + " belongs to conversation " +
                                      std::to_string(at->conversation_id) + ", not " +
                                      std::to_string(m.conversation_id));
  rows::validate_message(m);  // before changing anything
  if (m.role != at->role)
    throw StorageError("invalid", "a " + m.role + " message cannot replace " + at->role + " message " +
                                      std::to_string(replaced_id) + " (an alternative has the role of the one it replaces)");
  clear_chosen(db_, at->conversation_id, at->parent_id);
  Message copy = m;
  copy.conversation_id = at->conversation_id;
  copy.parent_id = at->parent_id;
  copy.active = true;
  touch_conversation(db_, at->conversation_id);
  const int64_t id = rows::insert_message(db_, copy);
  tx.commit();
  return id;
}

std::vector<Message> ConversationStore::messages(int64_t conversation_id) const {
  return rows::select_messages(db_, conversation_id, /*active_only=*/true);
}

std::vector<Message> ConversationStore::all_messages(int64_t conversation_id) const {
  return rows::select_messages(db_, conversation_id, /*active_only=*/false);
}

std::vector<Message> ConversationStore::alternatives(int64_t id) const {
  const std::optional<Place> at = place_of(db_, id);
  if (!at) return {};
  return branches::alternatives(all_messages(at->conversation_id), id);
}

std::vector<std::pair<int64_t, std::vector<int64_t>>> ConversationStore::path_alternatives(
    int64_t conversation_id) const {
  const std::vector<Message> all = all_messages(conversation_id);
  // parent -> ids of its children in insertion order (all_messages is in id order)
  std::unordered_map<int64_t, std::vector<int64_t>> places;
  for (const Message& m : all) places[m.parent_id].push_back(m.id);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> out;
  for (const Message& m : branches::active_path(all)) {
    const std::vector<int64_t>& ids = places[m.parent_id];
    if (ids.size() > 1) out.emplace_back(m.id, ids);
  }
  return out;
}

void ConversationStore::switch_alternative(int64_t from_id, int64_t to_id) {
  sql::Transaction tx(db_);
  const std::optional<Place> from = place_of(db_, from_id);
  if (!from) throw_no_message(from_id);
  const std::optional<Place> to = place_of(db_, to_id);
  if (!to) throw_no_message(to_id);
  if (to->conversation_id != from->conversation_id || to->parent_id != from->parent_id)
    throw StorageError("invalid", "message " + std::to_string(to_id) + " is not an alternative of message " +
                                      std::to_string(from_id));
  if (!from->active) throw StorageError("invalid", "message " + std::to_string(from_id) + " is not the active one");
  if (from_id == to_id) return;  // the destructor ends the empty transaction
  set_active(db_, from_id, false);
  set_active(db_, to_id, true);
  choose_down(db_, from->conversation_id, to_id);
  touch_conversation(db_, from->conversation_id);
  tx.commit();
}

void ConversationStore::delete_message(int64_t message_id) {
  sql::Transaction tx(db_);
  const std::optional<Place> at = place_of(db_, message_id);
  if (!at) return;  // the destructor ends the empty transaction
  // Unchosen first: its chosen child takes its place at the parent without two chosen at once.
  if (at->active) set_active(db_, message_id, false);
  {
    sql::Stmt st(db_, kReparentChildren, "move children to the parent");
    st.bind(1, message_id);
    bind_parent(st, 2, at->parent_id);
    st.bind(3, int64_t{at->active ? 1 : 0}).run();
  }
  {
    sql::Stmt st(db_, kDeleteMessage, "delete message");
    st.bind(1, message_id).run();
  }
  // The shown message went without a child to take its place: the newest remaining alternative
  // there is shown instead (with its branch), so the others never become unreachable.
  if (at->active) choose_down(db_, at->conversation_id, at->parent_id);
  touch_conversation(db_, at->conversation_id);
  tx.commit();
}

}  // namespace specchat
