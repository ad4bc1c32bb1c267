// ConversationStore: conversations, messages, token ids (pair-aligned), regenerate branches,
// default path. Recovery, migrations and concurrency are in test_storage_recovery.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <optional>
#include <thread>

#include "storage/conversation_store.h"
#include "storage_test_util.h"

using namespace specchat;
using specchat::test::make_message;
using specchat::test::numbered;
using specchat::test::RawDb;
using specchat::test::storage_error_kind;
using specchat::test::TempDir;

TEST_CASE("conversations: create, list, rename, system prompt", "[unit]") {
  TempDir dir;
  ConversationStore store(dir.file("chat.sqlite"));
  CHECK_FALSE(store.open_info().recovered_from_corrupt);
  CHECK(store.list_conversations().empty());

  const int64_t a = store.create_conversation("first", "be brief");
  const int64_t b = store.create_conversation("second");
  REQUIRE(a != b);

  auto ca = store.conversation(a);
  REQUIRE(ca);
  CHECK(ca->title == "first");
  CHECK(ca->system_prompt == "be brief");
  CHECK(ca->created_ms > 1'600'000'000'000);  // epoch milliseconds, not seconds
  CHECK(ca->updated_ms == ca->created_ms);
  CHECK_FALSE(store.conversation(b + 1000));

  // Newest updated first; equal timestamps fall back to the newer id.
  auto list = store.list_conversations();
  REQUIRE(list.size() == 2);
  CHECK(list[0].id == b);
  CHECK(list[1].id == a);

  // A message moves its conversation to the top (after a pause: within one millisecond the
  // timestamps tie and the newer id wins).
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  store.add_message(make_message(a, "user", "hi"));
  list = store.list_conversations();
  CHECK(list[0].id == a);
  CHECK(list[0].updated_ms >= list[1].updated_ms);

  store.rename_conversation(b, "renamed: ünïcödé ✓");
  store.set_system_prompt(b, "new prompt");
  auto cb = store.conversation(b);
  REQUIRE(cb);
  CHECK(cb->title == "renamed: ünïcödé ✓");
  CHECK(cb->system_prompt == "new prompt");
  CHECK(store.list_conversations()[0].id == a);  // edits do not reorder the list

  CHECK(storage_error_kind([&] { store.rename_conversation(9999, "x"); }) == "not_found");
  CHECK(storage_error_kind([&] { store.set_system_prompt(9999, "x"); }) == "not_found");
}

TEST_CASE("conversations: delete cascades to messages", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("chat.sqlite");
  ConversationStore store(path);
  const int64_t keep = store.create_conversation("keep");
  const int64_t drop = store.create_conversation("drop");
  for (int i = 0; i < 3; ++i) {
    store.add_message(make_message(keep, "user", numbered("k", i), {1, 2, 3}));
    store.add_message(make_message(drop, "user", numbered("d", i), {4, 5}));
  }
  store.delete_conversation(drop);
  store.delete_conversation(drop);  // unknown id: no-op
  CHECK_FALSE(store.conversation(drop));
  CHECK(store.list_conversations().size() == 1);
  CHECK(store.messages(keep).size() == 3);
  // Checked on disk, bypassing the store: no orphan rows left behind.
  RawDb raw(path);
  CHECK(raw.integer(numbered("SELECT count(*) FROM messages WHERE conversation_id = ", drop)) == 0);
  CHECK(raw.integer("SELECT count(*) FROM messages") == 3);
}

TEST_CASE("messages: add and list round-trip every field", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("c");

  Message sys = make_message(c, "system", "You are terse.");
  Message user = make_message(c, "user", "What is 2+2? \xF0\x9F\xA4\x94\nline two", {1, 450, 29871, 7});
  user.tokenizer_hash = 0xFFFFFFFFFFFFFFFFull;  // top bit set: stored bit-for-bit in INTEGER
  user.template_name = "chatml";
  user.created_ms = 1'700'000'000'123;
  Message asst = make_message(c, "assistant", "4", {29946, 2});
  asst.drafted = {1, 0};
  asst.tokenizer_hash = 0x0123456789ABCDEFull;
  asst.template_name = "chatml";
  asst.stats.mode = "speculative";
  asst.stats.n_tokens = 2;
  asst.stats.tokens_per_s = 123.5;
  asst.stats.ttft_ms = 41.25;
  asst.stats.acceptance_rate = 0.5;
  asst.stats.mean_accepted_length = 1.5;
  asst.stats.n_drafted = 2;
  asst.stats.n_accepted = 1;

  const int64_t id_sys = store.add_message(sys);
  const int64_t id_user = store.add_message(user);
  const int64_t id_asst = store.add_message(asst);
  CHECK(id_sys < id_user);
  CHECK(id_user < id_asst);

  const auto ms = store.messages(c);
  REQUIRE(ms.size() == 3);
  CHECK(ms[0].id == id_sys);
  CHECK(ms[0].role == "system");
  CHECK(ms[0].token_ids.empty());
  CHECK(ms[0].created_ms > 0);  // 0 means "now"
  CHECK(ms[1].text == user.text);
  CHECK(ms[1].token_ids == user.token_ids);
  CHECK(ms[1].tokenizer_hash == user.tokenizer_hash);
  CHECK(ms[1].template_name == "chatml");
  CHECK(ms[1].created_ms == user.created_ms);
  CHECK(ms[1].conversation_id == c);
  CHECK(ms[1].active);
  CHECK(ms[2].drafted == asst.drafted);
  CHECK(ms[2].tokenizer_hash == asst.tokenizer_hash);
  CHECK(ms[2].stats.mode == "speculative");
  CHECK(ms[2].stats.n_tokens == 2);
  CHECK(ms[2].stats.tokens_per_s == Approx(123.5));
  CHECK(ms[2].stats.ttft_ms == Approx(41.25));
  CHECK(ms[2].stats.acceptance_rate == Approx(0.5));
  CHECK(ms[2].stats.mean_accepted_length == Approx(1.5));
  CHECK(ms[2].stats.n_drafted == 2);
  CHECK(ms[2].stats.n_accepted == 1);

  store.delete_message(id_sys);
  store.delete_message(id_sys);  // unknown id: no-op
  CHECK(store.messages(c).size() == 2);
  CHECK(store.messages(c + 1).empty());
}

TEST_CASE("messages: refused input leaves the database unchanged", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("c");
  store.add_message(make_message(c, "user", "ok"));
  const int64_t updated = store.conversation(c)->updated_ms;

  CHECK(storage_error_kind([&] { store.add_message(make_message(c + 100, "user", "x")); }) == "not_found");
  CHECK(storage_error_kind([&] { store.add_message(make_message(c, "robot", "x")); }) == "invalid");
  CHECK(storage_error_kind([&] { store.add_message(make_message(c, "user", "x", {3, -1})); }) == "invalid");
  CHECK(storage_error_kind([&] { store.add_message(make_message(c, "user", "x", {3, -7, 4})); }) == "invalid");
  Message bad_drafted = make_message(c, "assistant", "x", {1, 2, 3});
  bad_drafted.drafted = {1, 1};
  CHECK(storage_error_kind([&] { store.add_message(bad_drafted); }) == "invalid");

  CHECK(store.messages(c).size() == 1);
  CHECK(store.conversation(c)->updated_ms == updated);  // the touch was rolled back too
}

TEST_CASE("token ids: pair_align and pair_unalign", "[unit]") {
  using V = std::vector<int32_t>;
  CHECK(pair_align(V{}) == V{});
  CHECK(pair_align(V{5}) == V{5, kPairPad});
  CHECK(pair_align(V{5, 6}) == V{5, 6});
  CHECK(pair_align(V{0, 1, 2}) == V{0, 1, 2, -1});
  CHECK(pair_unalign(V{}) == V{});
  CHECK(pair_unalign(V{5, -1}) == V{5});
  CHECK(pair_unalign(V{5, 6}) == V{5, 6});
  for (size_t n = 0; n < 9; ++n) {
    V ids;
    for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(i * 7919));
    const V padded = pair_align(ids);
    CHECK(padded.size() % 2 == 0);
    CHECK(padded.size() / 2 == (n + 1) / 2);  // latent length
    CHECK(pair_unalign(padded) == ids);
  }
  CHECK_THROWS_AS(pair_align(V{1, -1}), std::invalid_argument);  // -1 would read back as a pad
  CHECK_THROWS_AS(pair_align(V{INT32_MIN}), std::invalid_argument);
  CHECK_THROWS_AS(pair_unalign(V{5}), std::invalid_argument);  // odd length
  CHECK_THROWS_AS(pair_unalign(V{-1, 5}), std::invalid_argument);  // pad not at the end
  CHECK_THROWS_AS(pair_unalign(V{-1, -1}), std::invalid_argument);  // two pads
}

TEST_CASE("token ids: database round trip and on-disk layout", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("ids.sqlite");
  ConversationStore store(path);
  const int64_t c = store.create_conversation("ids");

  std::vector<std::vector<int32_t>> cases = {
      {},                                     // empty
      {0},                                    // one id, the smallest
      {1, 2},                                 // even
      {7, 8, 9},                              // odd
      {INT32_MAX},                            // largest id, odd
      {INT32_MAX, 1 << 24, 65535, 65536, 0},  // large ids
  };
  std::vector<int32_t> long_odd;
  for (uint32_t i = 0; i < 4097; ++i) long_odd.push_back(static_cast<int32_t>((i * 2654435761u) % 2000000000u));
  cases.push_back(long_odd);

  std::vector<int64_t> ids;
  for (const auto& t : cases) ids.push_back(store.add_message(make_message(c, "assistant", "t", t)));
  const auto ms = store.messages(c);
  REQUIRE(ms.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i << " with " << cases[i].size() << " ids");
    CHECK(ms[i].token_ids == cases[i]);
  }

  // Layout on disk: int32 little-endian, a -1 pad when odd; raw_len and latent_len recorded.
  RawDb raw(path);
  auto row = [&](size_t i, const char* col) {
    return raw.scalar(std::string("SELECT ") + col + " FROM messages WHERE id = " + std::to_string(ids[i]));
  };
  CHECK(row(0, "hex(token_ids)") == "");
  CHECK(row(0, "raw_len") == "0");
  CHECK(row(0, "latent_len") == "0");
  CHECK(row(1, "hex(token_ids)") == "00000000FFFFFFFF");
  CHECK(row(2, "hex(token_ids)") == "0100000002000000");
  CHECK(row(3, "hex(token_ids)") == "070000000800000009000000FFFFFFFF");
  CHECK(row(3, "raw_len") == "3");
  CHECK(row(3, "latent_len") == "2");
  CHECK(row(4, "hex(token_ids)") == "FFFFFF7FFFFFFFFF");
  CHECK(row(6, "raw_len") == "4097");
  CHECK(row(6, "latent_len") == "2049");
  CHECK(row(6, "length(token_ids)") == std::to_string(2049 * 8));
}

TEST_CASE("token ids: a tampered blob is reported, not silently dropped", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("t.sqlite");
  int64_t c = 0;
  {
    ConversationStore store(path);
    c = store.create_conversation("c");
    store.add_message(make_message(c, "user", "x", {1, 2, 3}));
  }
  {
    RawDb raw(path);  // a pad in the middle, lengths still consistent with the CHECKs
    raw.exec("UPDATE messages SET token_ids = x'FFFFFFFF0200000003000000FFFFFFFF'");
  }
  ConversationStore store(path);
  CHECK(storage_error_kind([&] { store.messages(c); }) == "corrupt");
}

TEST_CASE("regenerate keeps one active path - replaced replies stay as inactive branches", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("c");
  const int64_t q = store.add_message(make_message(c, "user", "Q", {10, 11}));
  int64_t reply = store.add_message(make_message(c, "assistant", "A0", {20}));

  for (int i = 1; i <= 5; ++i) reply = store.add_message_replacing(reply, make_message(0, "assistant", numbered("A", i)));

  auto active = store.messages(c);
  REQUIRE(active.size() == 2);  // the context: the question and the latest answer only
  CHECK(active[0].id == q);
  CHECK(active[1].id == reply);
  CHECK(active[1].text == "A5");
  auto all = store.all_messages(c);
  REQUIRE(all.size() == 7);
  int n_active_assistant = 0;
  for (const auto& m : all) n_active_assistant += (m.role == "assistant" && m.active) ? 1 : 0;
  CHECK(n_active_assistant == 1);
  CHECK(all[1].text == "A0");
  CHECK_FALSE(all[1].active);

  // Edit-and-resend of the question: it and everything after it leave the active path.
  const int64_t q2 = store.add_message_replacing(q, make_message(c, "user", "Q'"));
  active = store.messages(c);
  REQUIRE(active.size() == 1);
  CHECK(active[0].id == q2);

  // Switching back brings the old question with the reply it had.
  store.switch_alternative(q2, q);
  active = store.messages(c);
  REQUIRE(active.size() == 2);
  CHECK(active[0].text == "Q");
  CHECK(active[1].text == "A5");

  const int64_t other = store.create_conversation("other");
  CHECK(storage_error_kind([&] { store.add_message_replacing(q, make_message(other, "user", "x")); }) == "invalid");
  CHECK(storage_error_kind([&] { store.add_message_replacing(99999, make_message(0, "user", "x")); }) == "not_found");
  CHECK(storage_error_kind([&] { store.switch_alternative(99999, q); }) == "not_found");
  CHECK(store.all_messages(c).size() == 8);  // the refused calls changed nothing
}

namespace {
// Sets (or unsets, for nullopt) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value->c_str(), 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};
}  // namespace

TEST_CASE("default_database_path: SPECCHAT_DB override and XDG_DATA_HOME", "[unit]") {
  TempDir dir;
  {
    const std::string p = dir.file("a/b/override.sqlite");
    ScopedEnv db("SPECCHAT_DB", p);
    CHECK(default_database_path() == p);
    CHECK(std::filesystem::is_directory(dir.path() / "a" / "b"));
  }
  {
    ScopedEnv db("SPECCHAT_DB", std::nullopt);
    ScopedEnv xdg("XDG_DATA_HOME", dir.file("xdg"));
    const std::string p = default_database_path();
    CHECK(p == dir.file("xdg/specchat/specchat.sqlite"));
    CHECK(std::filesystem::is_directory(dir.path() / "xdg" / "specchat"));
    ConversationStore store(p);  // usable as is
    CHECK(store.list_conversations().empty());
  }
  {
    ScopedEnv db("SPECCHAT_DB", std::nullopt);
    ScopedEnv xdg("XDG_DATA_HOME", std::string("relative/dir"));  // ignored, per the XDG spec
    ScopedEnv home("HOME", dir.file("home"));
    CHECK(default_database_path() == dir.file("home/.local/share/specchat/specchat.sqlite"));
  }
}

TEST_CASE("open: a missing directory is an io error", "[unit]") {
  TempDir dir;
  CHECK(storage_error_kind([&] { ConversationStore s(dir.file("no/such/dir/x.sqlite")); }) == "io");
}
