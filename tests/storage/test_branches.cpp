// The branch tree of a conversation (storage/branches.h, storage/store_branches.cpp, schema 5):
// an alternative of an earlier reply or user message keeps the turns that followed it, so
// switching back and forth shows each branch whole; the active path is what a context is built
// from; deleting a message keeps the path after it; rows stored before schema 5 keep their exact
// active path.
#include <catch2/catch.hpp>

#include "storage/branches.h"
#include "storage/conversation_store.h"
#include "storage/migrations.h"
#include "storage_test_util.h"

using namespace specchat;
using namespace specchat::test;

namespace {

std::vector<int64_t> ids(const std::vector<Message>& ms) {
  std::vector<int64_t> out;
  for (const Message& m : ms) out.push_back(m.id);
  return out;
}

std::vector<std::string> texts(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const Message& m : ms) out.push_back(m.text);
  return out;
}

Message node(int64_t id, int64_t parent, const std::string& role, bool active) {
  Message m = make_message(0, role, numbered("m", id));
  m.id = id;
  m.parent_id = parent;
  m.active = active;
  return m;
}

using Texts = std::vector<std::string>;

}  // namespace

TEST_CASE("branches: the active path follows the chosen child of each message", "[unit]") {
  // 1 ─┬─ 2 ── 4 (chosen)          path: 1 3 5
  //    └─ 3* ─ 5*
  const std::vector<Message> all = {node(1, 0, "user", true), node(2, 1, "assistant", false),
                                    node(3, 1, "assistant", true), node(4, 2, "user", true),
                                    node(5, 3, "user", true)};
  CHECK(ids(branches::active_path(all)) == std::vector<int64_t>{1, 3, 5});
  CHECK(ids(branches::alternatives(all, 2)) == std::vector<int64_t>{2, 3});
  CHECK(ids(branches::alternatives(all, 5)) == std::vector<int64_t>{5});
  CHECK(branches::alternatives(all, 42).empty());
  CHECK(branches::active_path({}).empty());
  // A damaged list whose chosen first message is its own parent stops instead of looping.
  CHECK(branches::active_path({node(7, 0, "user", true), node(8, 8, "user", true)}).size() == 1);
}

TEST_CASE("branches: validate_tree refuses a parent that is not earlier and two chosen at one place", "[unit]") {
  CHECK_NOTHROW(branches::validate_tree({node(1, 0, "user", true), node(2, 1, "assistant", false),
                                         node(3, 1, "assistant", true)}));
  std::string why;
  CHECK(storage_error_kind([] { branches::validate_tree({node(1, 2, "user", true), node(2, 0, "user", false)}); },
                           &why) == "invalid");
  CHECK(why.find("not a message before it") != std::string::npos);
  CHECK(storage_error_kind([] { branches::validate_tree({node(1, 0, "user", true), node(2, 1, "assistant", true),
                                                         node(3, 1, "assistant", true)}); },
                           &why) == "invalid");
  CHECK(why.find("second active") != std::string::npos);
  CHECK(storage_error_kind([] { branches::validate_tree({node(1, 0, "user", true), node(1, 1, "user", true)}); }) ==
        "invalid");
}

TEST_CASE("branches: parents inferred for rows stored before schema 5 keep the old active path exactly", "[unit]") {
  // Stored in this order by the old store: ask, reply, Regenerate (reply'), ask again, reply,
  // edit the second question (q2'), its reply. The old "active" meant "on the path".
  std::vector<Message> all = {node(1, 0, "user", true),      node(2, 0, "assistant", false),
                              node(3, 0, "assistant", true), node(4, 0, "user", false),
                              node(5, 0, "assistant", false), node(6, 0, "user", true),
                              node(7, 0, "assistant", true)};
  branches::infer_legacy_parents(all);
  CHECK(ids(branches::active_path(all)) == std::vector<int64_t>{1, 3, 6, 7});
  CHECK(ids(branches::alternatives(all, 3)) == std::vector<int64_t>{2, 3});  // the regenerated reply
  CHECK(ids(branches::alternatives(all, 6)) == std::vector<int64_t>{4, 6});  // the edited question
  CHECK(all[4].parent_id == 4);  // the old question's reply stays below it
  CHECK_NOTHROW(branches::validate_tree(all));
}

TEST_CASE("store: an alternative of an earlier reply keeps the turns after it, both ways", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("branches");
  store.add_message(make_message(c, "user", "q1"));
  const int64_t a1 = store.add_message(make_message(c, "assistant", "a1"));
  store.add_message(make_message(c, "user", "q2"));
  store.add_message(make_message(c, "assistant", "a2"));
  // Back at the first reply (after switching to it, or from another client): a new alternative
  // there starts a new branch, and the old one keeps q2/a2.
  const int64_t b1 = store.add_message_replacing(a1, make_message(c, "assistant", "b1"));
  CHECK(texts(store.messages(c)) == Texts{"q1", "b1"});
  store.add_message(make_message(c, "user", "q3"));
  store.add_message(make_message(c, "assistant", "a3"));
  CHECK(texts(store.messages(c)) == Texts{"q1", "b1", "q3", "a3"});

  const auto alts = store.path_alternatives(c);
  REQUIRE(alts.size() == 1);
  CHECK(alts[0].first == b1);
  CHECK(alts[0].second == std::vector<int64_t>{a1, b1});

  store.switch_alternative(b1, a1);
  CHECK(texts(store.messages(c)) == Texts{"q1", "a1", "q2", "a2"});
  CHECK(store.path_alternatives(c).front().first == a1);
  store.switch_alternative(a1, b1);
  CHECK(texts(store.messages(c)) == Texts{"q1", "b1", "q3", "a3"});
  // The path and the tree walk agree, and nothing was lost.
  CHECK(ids(store.messages(c)) == ids(branches::active_path(store.all_messages(c))));
  CHECK(store.all_messages(c).size() == 7);
  CHECK(storage_error_kind([&] { store.switch_alternative(a1, b1); }) == "invalid");  // a1 is not active
}

TEST_CASE("store: editing an earlier user message branches there, the old question keeps its turns", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("edit");
  const int64_t q1 = store.add_message(make_message(c, "user", "q1"));
  store.add_message(make_message(c, "assistant", "a1"));
  store.add_message(make_message(c, "user", "q2"));
  store.add_message(make_message(c, "assistant", "a2"));
  const int64_t e1 = store.add_message_replacing(q1, make_message(0, "user", "q1 edited"));
  store.add_message(make_message(c, "assistant", "e1 reply"));
  CHECK(texts(store.messages(c)) == Texts{"q1 edited", "e1 reply"});
  CHECK(ids(store.alternatives(q1)) == std::vector<int64_t>{q1, e1});
  store.switch_alternative(e1, q1);
  CHECK(texts(store.messages(c)) == Texts{"q1", "a1", "q2", "a2"});
  // Appending goes to the end of the active path, not after the newest row.
  store.add_message(make_message(c, "user", "q3"));
  CHECK(texts(store.messages(c)) == Texts{"q1", "a1", "q2", "a2", "q3"});
  store.switch_alternative(q1, e1);
  CHECK(texts(store.messages(c)) == Texts{"q1 edited", "e1 reply"});
}

TEST_CASE("store: deleting a message keeps the path after it, a branch keeps its place", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("delete");
  store.add_message(make_message(c, "user", "q1"));
  const int64_t a1 = store.add_message(make_message(c, "assistant", "a1"));
  const int64_t q2 = store.add_message(make_message(c, "user", "q2"));
  const int64_t a2 = store.add_message(make_message(c, "assistant", "a2"));
  const int64_t b2 = store.add_message_replacing(a2, make_message(c, "assistant", "b2"));
  store.add_message(make_message(c, "user", "q3"));

  store.delete_message(q2);  // in the middle of the path: a2/b2 now follow a1
  CHECK(texts(store.messages(c)) == Texts{"q1", "a1", "b2", "q3"});
  CHECK(ids(store.alternatives(b2)) == std::vector<int64_t>{a2, b2});
  store.delete_message(a2);  // on the inactive branch: the path does not change
  CHECK(texts(store.messages(c)) == Texts{"q1", "a1", "b2", "q3"});
  store.delete_message(a1);
  CHECK(texts(store.messages(c)) == Texts{"q1", "b2", "q3"});
  CHECK(ids(store.messages(c)) == ids(branches::active_path(store.all_messages(c))));
  store.delete_message(12345);  // unknown: nothing happens
  CHECK(store.all_messages(c).size() == 3);
}

TEST_CASE("store: the database itself refuses a second chosen message at one place", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("one.sqlite");
  int64_t c = 0, a1 = 0;
  {
    ConversationStore store(path);
    c = store.create_conversation("one");
    store.add_message(make_message(c, "user", "q"));
    a1 = store.add_message(make_message(c, "assistant", "a1"));
    store.add_message_replacing(a1, make_message(c, "assistant", "a2"));
  }
  RawDb raw(path);
  CHECK_THROWS_WITH(raw.exec("UPDATE messages SET active = 1 WHERE id = " + std::to_string(a1)),
                    Catch::Contains("UNIQUE"));
  CHECK_THROWS_WITH(raw.exec("PRAGMA foreign_keys = ON; DELETE FROM messages WHERE id = 1"),
                    Catch::Contains("FOREIGN KEY"));  // children would point nowhere
}

TEST_CASE("migrations: schema 4 -> 5 gives old branches parents and keeps the active path", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("v4.sqlite");
  {
    RawDb raw(path);
    for (const migrations::Step& s : migrations::steps())
      if (s.version <= 4) s.apply(raw.handle());
    raw.exec("PRAGMA user_version = 4");
    raw.exec("INSERT INTO conversations (title, created_ms, updated_ms) VALUES ('old', 1, 1)");
    // As the old store left them: ask, reply, Regenerate, ask again, reply, edit the second
    // question, its reply (active = on the path).
    const char* rows[][3] = {{"user", "q1", "1"},  {"assistant", "a1", "0"}, {"assistant", "a1b", "1"},
                             {"user", "q2", "0"},  {"assistant", "a2", "0"}, {"user", "q2b", "1"},
                             {"assistant", "a2b", "1"}};
    for (const auto& r : rows)
      raw.exec(std::string("INSERT INTO messages (conversation_id, role, text, created_ms, active) VALUES (1, '") +
               r[0] + "', '" + r[1] + "', 5, " + r[2] + ")");
  }
  ConversationStore store(path);
  CHECK(texts(store.messages(1)) == Texts{"q1", "a1b", "q2b", "a2b"});
  const auto alts = store.path_alternatives(1);
  REQUIRE(alts.size() == 2);
  CHECK(alts[0].second == std::vector<int64_t>{2, 3});
  CHECK(alts[1].second == std::vector<int64_t>{4, 6});
  // The old question's branch was stored without a chosen reply: switching picks its newest.
  store.switch_alternative(6, 4);
  CHECK(texts(store.messages(1)) == Texts{"q1", "a1b", "q2", "a2"});
  store.switch_alternative(3, 2);
  CHECK(texts(store.messages(1)) == Texts{"q1", "a1"});
  RawDb raw(path);
  CHECK(raw.integer("PRAGMA user_version") == ConversationStore::schema_version());
  const std::string fresh = dir.file("fresh.sqlite");
  { ConversationStore f(fresh); }
  RawDb fresh_raw(fresh);
  const std::string schema = "SELECT sql FROM sqlite_master WHERE tbl_name = 'messages' ORDER BY name";
  CHECK(raw.column(schema) == fresh_raw.column(schema));
}

TEST_CASE("store: deleting the shown alternative shows another one there, never strands them", "[unit]") {
  // Found by a fresh-clone check: deleting the chosen reply left its alternatives unreachable.
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("delete alternatives");
  store.add_message(make_message(c, "user", "u1"));
  const int64_t a1 = store.add_message(make_message(c, "assistant", "A1"));
  store.add_message(make_message(c, "user", "u2"));
  store.add_message(make_message(c, "assistant", "A2"));
  const int64_t b1 = store.add_message_replacing(a1, make_message(c, "assistant", "B1"));
  store.delete_message(b1);  // the newest remaining alternative comes back, with its branch
  CHECK(texts(store.messages(c)) == Texts{"u1", "A1", "u2", "A2"});
  CHECK(ids(store.alternatives(a1)) == std::vector<int64_t>{a1});

  const int64_t c2 = store.create_conversation("first message");
  const int64_t q = store.add_message(make_message(c2, "user", "q"));
  const int64_t q2 = store.add_message_replacing(q, make_message(c2, "user", "q edited"));
  store.delete_message(q2);  // at the conversation's first place too
  CHECK(texts(store.messages(c2)) == Texts{"q"});
}

TEST_CASE("store: an alternative has the role of the message it replaces", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("roles");
  store.add_message(make_message(c, "user", "u1"));
  const int64_t a1 = store.add_message(make_message(c, "assistant", "A1"));
  CHECK(storage_error_kind([&] { store.add_message_replacing(a1, make_message(c, "user", "not a reply")); }) == "invalid");
  CHECK(store.all_messages(c).size() == 2);  // nothing stored
  CHECK(texts(store.messages(c)) == Texts{"u1", "A1"});
}
