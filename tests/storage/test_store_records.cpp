// ConversationStore beyond conversations and messages: search, generations, models (and
// sha256_file), compare runs, import_conversation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "storage/conversation_store.h"
#include "storage_test_util.h"

using namespace specchat;
using specchat::test::make_message;
using specchat::test::RawDb;
using specchat::test::storage_error_kind;
using specchat::test::TempDir;

namespace {

std::vector<int64_t> ids_of(const std::vector<Conversation>& cs) {
  std::vector<int64_t> out;
  for (const auto& c : cs) out.push_back(c.id);
  return out;
}

void write_text(const std::string& path, const std::string& s) {
  specchat::test::write_bytes(path, std::vector<char>(s.begin(), s.end()));
}

}  // namespace

TEST_CASE("search: title or message text, ASCII case-insensitive, newest first", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t a = store.create_conversation("Rust tips");
  store.add_message(make_message(a, "user", "hello World"));
  const int64_t b = store.create_conversation("Cooking");
  store.add_message(make_message(b, "user", "I am 100% sure_thing"));
  const int64_t c = store.create_conversation("50 percent");
  store.add_message(make_message(c, "assistant", "a_b and C:\\path"));
  const int64_t d = store.create_conversation("branches");
  const int64_t old = store.add_message(make_message(d, "assistant", "the secret reply"));
  store.add_message_replacing(old, make_message(d, "assistant", "the new reply"));
  const int64_t e = store.create_conversation("unrelated");
  // Order by activity: a message in `a` moves it to the top.
  store.add_message(make_message(a, "assistant", "bye"));
  const auto all = ids_of(store.list_conversations());

  CHECK(ids_of(store.search_conversations("rust")) == std::vector<int64_t>{a});    // title
  CHECK(ids_of(store.search_conversations("WORLD")) == std::vector<int64_t>{a});   // message
  CHECK(ids_of(store.search_conversations("secret")) == std::vector<int64_t>{d});  // inactive branch
  CHECK(store.search_conversations("no such text").empty());
  CHECK(ids_of(store.search_conversations("")) == all);  // everything, in list order

  // LIKE metacharacters in the query match themselves: unescaped, "%" and "_" would match
  // every conversation and "0%" would also match "50 percent".
  CHECK(ids_of(store.search_conversations("%")) == std::vector<int64_t>{b});
  CHECK(ids_of(store.search_conversations("0%")) == std::vector<int64_t>{b});
  std::vector<int64_t> underscore = ids_of(store.search_conversations("_"));
  std::sort(underscore.begin(), underscore.end());
  CHECK(underscore == std::vector<int64_t>{b, c});
  CHECK(ids_of(store.search_conversations("e_t")) == std::vector<int64_t>{b});
  CHECK(ids_of(store.search_conversations("a_b")) == std::vector<int64_t>{c});
  CHECK(ids_of(store.search_conversations("C:\\path")) == std::vector<int64_t>{c});
  CHECK(ids_of(store.search_conversations("\\")) == std::vector<int64_t>{c});
  CHECK(ids_of(store.search_conversations("unrel")) == std::vector<int64_t>{e});

  // Results follow list_conversations() order (newest activity first): "re" is in b, d and e.
  std::vector<int64_t> expected;
  for (int64_t id : all)
    if (id == b || id == d || id == e) expected.push_back(id);
  CHECK(ids_of(store.search_conversations("re")) == expected);
  CHECK(ids_of(store.search_conversations("RE")) == expected);
}

TEST_CASE("generations: record and read back, checked input, deleted with the conversation", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("c");
  const int64_t m = store.add_message(make_message(c, "assistant", "reply", {1, 2, 3}));

  GenerationRecord g1;
  g1.mode = "speculative";
  g1.params_json = R"({"temperature":0,"draft_k":4})";
  g1.stats_json = R"({"tokens_per_s":123.5,"acceptance_rate":0.75})";
  g1.accepted_hist = {3, 0, 1, 2, 7};
  g1.created_ms = 1'700'000'000'555;
  GenerationRecord g2;
  g2.mode = "baseline";
  const int64_t id1 = store.record_generation(m, g1);
  const int64_t id2 = store.record_generation(m, g2);
  CHECK(id1 < id2);

  const auto gs = store.generations(m);
  REQUIRE(gs.size() == 2);
  CHECK(gs[0].id == id1);
  CHECK(gs[0].message_id == m);
  CHECK(gs[0].mode == "speculative");
  CHECK(gs[0].params_json == g1.params_json);
  CHECK(gs[0].stats_json == g1.stats_json);
  CHECK(gs[0].accepted_hist == g1.accepted_hist);
  CHECK(gs[0].created_ms == g1.created_ms);
  CHECK(gs[1].mode == "baseline");
  CHECK(gs[1].params_json.empty());
  CHECK(gs[1].accepted_hist.empty());
  CHECK(gs[1].created_ms > 1'600'000'000'000);  // 0 = now
  CHECK(store.generations(m + 100).empty());

  CHECK(storage_error_kind([&] { store.record_generation(m + 100, g2); }) == "not_found");
  GenerationRecord bad = g2;
  bad.mode = "";
  CHECK(storage_error_kind([&] { store.record_generation(m, bad); }) == "invalid");
  bad = g2;
  bad.stats_json = "{not json";
  CHECK(storage_error_kind([&] { store.record_generation(m, bad); }) == "invalid");
  bad = g2;
  bad.accepted_hist = {1, -2};
  CHECK(storage_error_kind([&] { store.record_generation(m, bad); }) == "invalid");
  CHECK(store.generations(m).size() == 2);  // refused calls stored nothing

  store.delete_conversation(c);
  CHECK(store.generations(m).empty());  // ON DELETE CASCADE through messages
}

TEST_CASE("models: upsert by path and look up", "[unit]") {
  ConversationStore store(":memory:");
  ModelRecord m;
  m.path = "/models/target.gguf";
  m.sha256 = std::string(64, 'a');
  m.size_bytes = 5'000'000'000;  // above 2^32
  m.architecture = "llama";
  const int64_t id = store.upsert_model(m);

  auto got = store.model_by_path(m.path);
  REQUIRE(got);
  CHECK(got->id == id);
  CHECK(got->path == m.path);
  CHECK(got->sha256 == m.sha256);
  CHECK(got->size_bytes == 5'000'000'000);
  CHECK(got->architecture == "llama");
  CHECK_FALSE(store.model_by_path("/models/other.gguf"));

  // Same path: the row is updated in place and keeps its id.
  m.sha256 = std::string(64, 'b');
  m.size_bytes = 42;
  m.architecture = "qwen2";
  CHECK(store.upsert_model(m) == id);
  got = store.model_by_path(m.path);
  REQUIRE(got);
  CHECK(got->sha256 == std::string(64, 'b'));
  CHECK(got->size_bytes == 42);
  CHECK(got->architecture == "qwen2");

  ModelRecord other = m;
  other.path = "/models/draft.gguf";
  CHECK(store.upsert_model(other) != id);

  ModelRecord bad = m;
  bad.path = "";
  CHECK(storage_error_kind([&] { store.upsert_model(bad); }) == "invalid");
  bad = m;
  bad.size_bytes = -1;
  CHECK(storage_error_kind([&] { store.upsert_model(bad); }) == "invalid");
}

TEST_CASE("sha256_file: FIPS 180-4 test vectors and a missing file", "[unit]") {
  TempDir dir;
  write_text(dir.file("abc"), "abc");
  write_text(dir.file("empty"), "");
  write_text(dir.file("million"), std::string(1'000'000, 'a'));  // spans several read chunks
  CHECK(sha256_file(dir.file("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_file(dir.file("empty")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_file(dir.file("million")) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(storage_error_kind([&] { sha256_file(dir.file("missing")); }) == "io");
}

TEST_CASE("compare runs: save, list newest first, per conversation, outlive the conversation", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("cmp.sqlite");
  ConversationStore store(path);
  const int64_t c = store.create_conversation("c");

  CompareRecord r1;
  r1.conversation_id = c;
  r1.created_ms = 1'700'000'000'001;
  r1.prompt = "Once upon a time \xE4\xB8\x96\xE7\x95\x8C";
  r1.params_json = R"({"temperature":0,"max_tokens":64})";
  r1.baseline_json = R"({"tokens_per_s":20.5,"ttft_ms":80,"total_ms":3200,"n_tokens":64})";
  r1.speculative_json = R"({"tokens_per_s":51.25,"ttft_ms":85,"total_ms":1280,"n_tokens":64})";
  r1.speedup = 2.5;
  r1.identical = true;
  r1.first_diff = -1;
  CompareRecord r2;
  r2.prompt = "no conversation";
  r2.speedup = 0.875;
  r2.identical = false;
  r2.first_diff = 17;
  const int64_t id1 = store.save_compare_run(r1);
  const int64_t id2 = store.save_compare_run(r2);

  auto all = store.compare_runs();
  REQUIRE(all.size() == 2);
  CHECK(all[0].id == id2);  // newest first
  CHECK(all[1].id == id1);
  CHECK_FALSE(all[0].conversation_id);
  CHECK(all[0].identical == false);
  CHECK(all[0].first_diff == 17);
  CHECK(all[0].speedup == 0.875);
  CHECK(all[0].created_ms > 1'600'000'000'000);  // 0 = now
  const CompareRecord& got = all[1];
  CHECK(got.conversation_id == std::optional<int64_t>(c));
  CHECK(got.created_ms == r1.created_ms);
  CHECK(got.prompt == r1.prompt);
  CHECK(got.params_json == r1.params_json);
  CHECK(got.baseline_json == r1.baseline_json);
  CHECK(got.speculative_json == r1.speculative_json);
  CHECK(got.speedup == 2.5);
  CHECK(got.identical);
  CHECK(got.first_diff == -1);

  auto of_c = store.compare_runs(c);
  REQUIRE(of_c.size() == 1);
  CHECK(of_c[0].id == id1);
  CHECK(store.compare_runs(c + 100).empty());

  CompareRecord bad = r2;
  bad.identical = true;  // with first_diff 17
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "invalid");
  bad = r2;
  bad.first_diff = -1;  // not identical, but no differing position
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "invalid");
  bad = r2;
  bad.first_diff = -5;
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "invalid");
  bad = r2;
  bad.speedup = std::numeric_limits<double>::quiet_NaN();
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "invalid");
  bad = r2;
  bad.baseline_json = "{\"x\":";
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "invalid");
  bad = r2;
  bad.conversation_id = c + 100;
  CHECK(storage_error_kind([&] { store.save_compare_run(bad); }) == "not_found");
  CHECK(store.compare_runs().size() == 2);

  // Measurements outlive the chat: the run stays, its link is cleared (ON DELETE SET NULL).
  store.delete_conversation(c);
  all = store.compare_runs();
  REQUIRE(all.size() == 2);
  CHECK_FALSE(all[1].conversation_id);
  RawDb raw(path);
  CHECK(raw.integer("SELECT count(*) FROM compare_runs WHERE conversation_id IS NULL") == 2);
}

TEST_CASE("import_conversation: every field preserved in one transaction", "[unit]") {
  ConversationStore store(":memory:");
  Conversation c;
  c.title = "imported";
  c.system_prompt = "be kind";
  c.created_ms = 1'600'000'000'000;
  c.updated_ms = 1'600'000'009'000;
  std::vector<Message> ms;
  ms.push_back(make_message(999, "user", "Q", {10, 11, 12}));
  ms.back().tokenizer_hash = 0x8000000000000001ull;
  ms.back().template_name = "llama2";
  ms.back().created_ms = 1'600'000'001'000;
  ms.push_back(make_message(999, "assistant", "old answer", {20}));
  ms.back().active = false;
  ms.back().created_ms = 1'600'000'002'000;
  ms.push_back(make_message(999, "assistant", "new answer", {30, 31}));
  ms.back().drafted = {1, 0};
  ms.back().stats.mode = "speculative";
  ms.back().stats.n_tokens = 2;
  ms.back().stats.tokens_per_s = 77.25;
  ms.back().stats.n_drafted = 4;
  ms.back().stats.n_accepted = 1;
  ms.back().created_ms = 1'600'000'003'000;

  const int64_t id = store.import_conversation(c, ms);
  const auto got_c = store.conversation(id);
  REQUIRE(got_c);
  CHECK(got_c->title == "imported");
  CHECK(got_c->system_prompt == "be kind");
  CHECK(got_c->created_ms == c.created_ms);
  CHECK(got_c->updated_ms == c.updated_ms);
  const auto got = store.all_messages(id);
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("message " << i);
    CHECK(got[i].conversation_id == id);
    CHECK(got[i].role == ms[i].role);
    CHECK(got[i].text == ms[i].text);
    CHECK(got[i].token_ids == ms[i].token_ids);
    CHECK(got[i].drafted == ms[i].drafted);
    CHECK(got[i].tokenizer_hash == ms[i].tokenizer_hash);
    CHECK(got[i].template_name == ms[i].template_name);
    CHECK(got[i].active == ms[i].active);
    CHECK(got[i].created_ms == ms[i].created_ms);
    CHECK(got[i].stats.mode == ms[i].stats.mode);
    CHECK(got[i].stats.n_tokens == ms[i].stats.n_tokens);
    CHECK(got[i].stats.tokens_per_s == ms[i].stats.tokens_per_s);
    CHECK(got[i].stats.n_drafted == ms[i].stats.n_drafted);
    CHECK(got[i].stats.n_accepted == ms[i].stats.n_accepted);
  }
  CHECK(store.messages(id).size() == 2);  // the inactive branch stays out of the context

  // A bad message anywhere stores nothing, not even the conversation row.
  auto bad = ms;
  bad.back().role = "robot";
  CHECK(storage_error_kind([&] { store.import_conversation(c, bad); }) == "invalid");
  bad = ms;
  bad.back().token_ids = {5, -3};  // refused inside the transaction, after two inserts
  bad.back().drafted.clear();
  CHECK(storage_error_kind([&] { store.import_conversation(c, bad); }) == "invalid");
  bad = ms;
  bad.back().drafted = {1, 2};  // drafted entries are 0 or 1
  CHECK(storage_error_kind([&] { store.import_conversation(c, bad); }) == "invalid");
  CHECK(store.list_conversations().size() == 1);
}
