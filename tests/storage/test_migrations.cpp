// Migration 4 (messages.finish): a database at schema 3 opens, keeps its replies with an empty
// finish reason, and stores new ones with theirs; the migrated file matches a fresh one.
#include <catch2/catch.hpp>

#include "storage/conversation_store.h"
#include "storage/migrations.h"
#include "storage_test_util.h"

using namespace specchat;
using namespace specchat::test;

TEST_CASE("migrations: schema 3 -> 4 adds messages.finish, old replies read as unknown", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("v3.sqlite");
  const int64_t conv = 1;
  {
    // The file as a build before migration 4 left it: steps 1 to 3.
    RawDb raw(path);
    for (const migrations::Step& s : migrations::steps())
      if (s.version <= 3) s.apply(raw.handle());
    raw.exec("PRAGMA user_version = 3");
    raw.exec("INSERT INTO conversations (title, created_ms, updated_ms) VALUES ('before finish reasons', 1, 1)");
    raw.exec(
        "INSERT INTO messages (conversation_id, role, text, token_ids, raw_len, latent_len, n_tokens, "
        "created_ms) VALUES (1, 'assistant', 'an old reply', x'0500000006000000', 2, 1, 2, 5)");
    CHECK(raw.column("SELECT name FROM pragma_table_info('messages') WHERE name = 'finish'").empty());
  }
  REQUIRE(migrations::latest_version() >= 4);
  {
    ConversationStore store(path);
    const auto ms = store.messages(conv);
    REQUIRE(ms.size() == 1);
    CHECK(ms[0].text == "an old reply");
    CHECK(ms[0].finish.empty());
    Message m = make_message(conv, "assistant", "cut", {7});
    m.finish = "length";
    store.add_message(m);
    CHECK(store.messages(conv).back().finish == "length");
  }
  RawDb raw(path);
  CHECK(raw.integer("PRAGMA user_version") == ConversationStore::schema_version());
  CHECK(raw.column("SELECT finish FROM messages ORDER BY id") == std::vector<std::string>{"", "length"});
  const std::string fresh = dir.file("fresh.sqlite");
  { ConversationStore f(fresh); }
  RawDb fresh_raw(fresh);
  CHECK(raw.column("SELECT sql FROM sqlite_master WHERE name = 'messages'") ==
        fresh_raw.column("SELECT sql FROM sqlite_master WHERE name = 'messages'"));
}
