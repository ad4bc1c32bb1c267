// ConversationStore robustness: schema versions and migrations, refused files, corrupt files
// moved aside, concurrent connections, and a writer process killed mid-write.
#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "storage/conversation_store.h"
#include "storage/migrations.h"
#include "storage_test_util.h"

using namespace specchat;
using specchat::test::make_message;
using specchat::test::numbered;
using specchat::test::RawDb;
using specchat::test::read_bytes;
using specchat::test::storage_error_kind;
using specchat::test::TempDir;
using specchat::test::write_bytes;

namespace {

// Schema version 1 exactly as the first release wrote it. Never edit: a file from that release
// must migrate to the same schema a fresh file gets. When this test fails, migration 1 was
// edited in place; restore it and add a new step instead.
constexpr const char* kFrozenSchemaV1 = R"sql(
PRAGMA application_id = 1399866216;
CREATE TABLE conversations (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  title         TEXT    NOT NULL DEFAULT '',
  system_prompt TEXT    NOT NULL DEFAULT '',
  created_ms    INTEGER NOT NULL,
  updated_ms    INTEGER NOT NULL
);
CREATE INDEX conversations_by_updated ON conversations(updated_ms DESC, id DESC);
CREATE TABLE messages (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  role            TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
  text            TEXT    NOT NULL DEFAULT '',
  token_ids       BLOB    NOT NULL DEFAULT x'',
  raw_len         INTEGER NOT NULL DEFAULT 0 CHECK (raw_len >= 0),
  latent_len      INTEGER NOT NULL DEFAULT 0,
  n_tokens        INTEGER NOT NULL DEFAULT 0,
  drafted         BLOB    NOT NULL DEFAULT x'',
  tokenizer_hash  INTEGER NOT NULL DEFAULT 0,
  template_name   TEXT    NOT NULL DEFAULT '',
  stats_json      TEXT,
  created_ms      INTEGER NOT NULL,
  active          INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
  CHECK (latent_len = (raw_len + 1) / 2),
  CHECK (length(token_ids) = 8 * latent_len),
  CHECK (length(drafted) IN (0, raw_len))
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE generations (
  id                 INTEGER PRIMARY KEY AUTOINCREMENT,
  message_id         INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  mode               TEXT    NOT NULL,
  params_json        TEXT,
  stats_json         TEXT,
  accepted_hist_json TEXT,
  created_ms         INTEGER NOT NULL
);
CREATE INDEX generations_by_message ON generations(message_id);
CREATE TABLE models (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  path         TEXT    NOT NULL,
  sha256       TEXT,
  size_bytes   INTEGER,
  architecture TEXT,
  UNIQUE (path)
);
)sql";

// Schema version 2 (compare_runs) exactly as that release wrote it. Never edit (see above).
constexpr const char* kFrozenSchemaV2 = R"sql(
CREATE TABLE compare_runs (
  id               INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id  INTEGER REFERENCES conversations(id) ON DELETE SET NULL,
  created_ms       INTEGER NOT NULL,
  prompt           TEXT    NOT NULL DEFAULT '',
  params_json      TEXT,
  baseline_json    TEXT,
  speculative_json TEXT,
  speedup          REAL,
  identical        INTEGER NOT NULL CHECK (identical IN (0, 1)),
  first_diff       INTEGER NOT NULL DEFAULT -1,
  CHECK ((identical = 1 AND first_diff = -1) OR (identical = 0 AND first_diff >= 0))
);
CREATE INDEX compare_runs_by_conversation ON compare_runs(conversation_id, id);
)sql";

std::vector<std::string> schema_of(const std::string& path) {
  RawDb raw(path);
  return raw.column(
      "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master "
      "WHERE name NOT LIKE 'sqlite_%' ORDER BY name");
}

std::vector<char> pseudo_random_bytes(size_t n, uint32_t seed) {
  std::vector<char> out(n);
  for (auto& c : out) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
  }
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("migrations: steps numbered 1..N, schema_version is the last", "[unit]") {
  const auto& steps = migrations::steps();
  REQUIRE_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) CHECK(steps[i].version == static_cast<int>(i + 1));
  CHECK(ConversationStore::schema_version() == steps.back().version);
}

TEST_CASE("open: fresh file gets the current schema, WAL, and the SpecChat application id", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("fresh.sqlite");
  write_bytes(path, {});  // an empty file is a valid empty database, not a corrupt one
  { ConversationStore store(path); CHECK_FALSE(store.open_info().recovered_from_corrupt); }
  RawDb raw(path);
  CHECK(raw.integer("PRAGMA user_version") == ConversationStore::schema_version());
  CHECK(raw.integer("PRAGMA application_id") == migrations::kApplicationId);
  CHECK(raw.scalar("PRAGMA journal_mode") == "wal");
  for (const char* t : {"conversations", "messages", "generations", "models", "compare_runs"})
    CHECK(raw.integer(std::string("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '") + t + "'") == 1);
}

TEST_CASE("migrations: a database created at schema version 1 opens and keeps its data", "[unit]") {
  TempDir dir;
  const std::string old_path = dir.file("v1.sqlite");
  {
    RawDb raw(old_path);
    raw.exec(kFrozenSchemaV1);
    raw.exec("PRAGMA user_version = 1");
    raw.exec("INSERT INTO conversations (title, system_prompt, created_ms, updated_ms) VALUES ('old', 'sp', 1, 2)");
    // ids {5, 6, 7}: raw_len 3, latent_len 2, pad -1.
    raw.exec(
        "INSERT INTO messages (conversation_id, role, text, token_ids, raw_len, latent_len, n_tokens, "
        "tokenizer_hash, template_name, stats_json, created_ms) VALUES (1, 'user', 'hello', "
        "x'050000000600000007000000FFFFFFFF', 3, 2, 0, -1, 'chatml', NULL, 3)");
    // Rows in the other v1 tables, as the first release wrote them.
    raw.exec(
        "INSERT INTO generations (message_id, mode, params_json, stats_json, accepted_hist_json, "
        "created_ms) VALUES (1, 'speculative', '{\"k\":4}', '{\"tps\":9.5}', '[1,0,2]', 4)");
    raw.exec(
        "INSERT INTO models (path, sha256, size_bytes, architecture) "
        "VALUES ('/m/t.gguf', 'abcd', 123, 'llama')");
  }
  {
    ConversationStore store(old_path);
    const auto convs = store.list_conversations();
    REQUIRE(convs.size() == 1);
    CHECK(convs[0].title == "old");
    CHECK(convs[0].system_prompt == "sp");
    const auto ms = store.messages(convs[0].id);
    REQUIRE(ms.size() == 1);
    CHECK(ms[0].text == "hello");
    CHECK(ms[0].token_ids == std::vector<int32_t>{5, 6, 7});
    CHECK(ms[0].tokenizer_hash == 0xFFFFFFFFFFFFFFFFull);
    store.add_message(make_message(convs[0].id, "assistant", "hi", {8}));
    CHECK(store.messages(convs[0].id).size() == 2);

    // v1 -> v2: the v1 generations and models rows read through the new API, and the new
    // compare_runs table links to the old conversation.
    const auto gens = store.generations(ms[0].id);
    REQUIRE(gens.size() == 1);
    CHECK(gens[0].mode == "speculative");
    CHECK(gens[0].params_json == "{\"k\":4}");
    CHECK(gens[0].accepted_hist == std::vector<int>{1, 0, 2});
    CHECK(gens[0].created_ms == 4);
    const auto model = store.model_by_path("/m/t.gguf");
    REQUIRE(model);
    CHECK(model->sha256 == "abcd");
    CHECK(model->size_bytes == 123);
    CHECK(model->architecture == "llama");
    CHECK(store.search_conversations("HELLO").size() == 1);
    CompareRecord run;
    run.conversation_id = convs[0].id;
    run.prompt = "hello";
    run.speedup = 1.5;
    run.identical = true;
    store.save_compare_run(run);
    REQUIRE(store.compare_runs(convs[0].id).size() == 1);
  }
  RawDb raw(old_path);
  CHECK(raw.integer("PRAGMA user_version") == ConversationStore::schema_version());
  CHECK(raw.integer("SELECT count(*) FROM compare_runs") == 1);
  CHECK(raw.column("PRAGMA foreign_key_check").empty());

  // The migrated old file and a fresh file end with the same schema.
  const std::string fresh_path = dir.file("fresh.sqlite");
  { ConversationStore fresh(fresh_path); }
  CHECK(schema_of(old_path) == schema_of(fresh_path));
}

TEST_CASE("open: a newer schema is refused and the file left unchanged", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("newer.sqlite");
  {
    ConversationStore store(path);
    store.create_conversation("from the future");
  }
  { RawDb raw(path); raw.exec("PRAGMA user_version = 99"); }
  std::string message;
  CHECK(storage_error_kind([&] { ConversationStore s(path); }, &message) == "newer_schema");
  CHECK(message.find("99") != std::string::npos);
  CHECK(message.find(numbered("version ", ConversationStore::schema_version())) != std::string::npos);
  CHECK(message.find(path) != std::string::npos);
  RawDb raw(path);
  CHECK(raw.integer("PRAGMA user_version") == 99);
  CHECK(raw.integer("SELECT count(*) FROM conversations") == 1);
  size_t n_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    n_files += starts_with(e.path().filename().string(), "newer.sqlite.corrupt") ? 1 : 0;
  CHECK(n_files == 0);  // refused, not mistaken for corruption
}

TEST_CASE("open: another program's SQLite file is refused, not modified", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("other.sqlite");
  { RawDb raw(path); raw.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me')"); }
  CHECK(storage_error_kind([&] { ConversationStore s(path); }) == "foreign_database");
  {
    RawDb raw(path);
    CHECK(raw.integer("SELECT count(*) FROM sqlite_master") == 1);
    CHECK(raw.scalar("SELECT body FROM notes") == "keep me");
  }
  const std::string path2 = dir.file("other2.sqlite");
  { RawDb raw(path2); raw.exec("PRAGMA application_id = 42; PRAGMA user_version = 1"); }
  CHECK(storage_error_kind([&] { ConversationStore s(path2); }) == "foreign_database");
}

TEST_CASE("open: a corrupt file is moved aside and a fresh database started", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("chat.sqlite");
  std::vector<char> garbage;
  SECTION("random bytes") { garbage = pseudo_random_bytes(3000, 1); }
  SECTION("SQLite magic followed by garbage") {
    const std::string magic("SQLite format 3\0", 16);
    garbage = pseudo_random_bytes(16 + 8192, 2);
    std::copy(magic.begin(), magic.end(), garbage.begin());
  }
  SECTION("a real database with a damaged page") {
    {
      ConversationStore store(path);
      const int64_t c = store.create_conversation("big");
      for (int i = 0; i < 200; ++i) store.add_message(make_message(c, "user", std::string(300, 'a' + i % 26)));
    }  // the last connection checkpoints the WAL into the main file
    garbage = read_bytes(path);
    REQUIRE(garbage.size() > 16 * 4096);
    const auto junk = pseudo_random_bytes(4096, 3);
    std::copy(junk.begin(), junk.end(), garbage.begin() + 8 * 4096);
  }
  SECTION("a row breaking a CHECK constraint (reported by quick_check, no sqlite error)") {
    {
      ConversationStore store(path);
      store.add_message(make_message(store.create_conversation("c"), "user", "x", {1, 2, 3}));
    }
    { RawDb raw(path); raw.exec("PRAGMA ignore_check_constraints = ON; UPDATE messages SET raw_len = 5"); }
    garbage = read_bytes(path);
  }
  write_bytes(path, garbage);
  const std::vector<char> wal_garbage = pseudo_random_bytes(1000, 4);
  write_bytes(path + "-wal", wal_garbage);

  std::string aside;
  {
    ConversationStore store(path);
    REQUIRE(store.open_info().recovered_from_corrupt);
    aside = store.open_info().moved_aside_to;
    CHECK(starts_with(aside, path + ".corrupt-"));
    CHECK(store.list_conversations().empty());
    store.create_conversation("new life");  // the fresh database works
  }
  // Nothing lost: the bad file and its WAL are still there, byte for byte, under the new name.
  const bool same_file = read_bytes(aside) == garbage;  // (not CHECKed directly: Catch would
  const bool same_wal = read_bytes(aside + "-wal") == wal_garbage;  // print every byte)
  CHECK(same_file);
  CHECK(same_wal);
  ConversationStore again(path);
  CHECK_FALSE(again.open_info().recovered_from_corrupt);
  CHECK(again.list_conversations().size() == 1);
}

TEST_CASE("open: several connections creating the same new file at once", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("race.sqlite");
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      try {
        ConversationStore s(path);
        s.create_conversation("t");
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back(e.what());
      }
    });
  for (auto& t : threads) t.join();
  CHECK(errors.empty());
  for (const auto& e : errors) WARN(e);
  ConversationStore s(path);
  CHECK(s.list_conversations().size() == 4);
}

TEST_CASE("concurrency: a reader reads while other connections write", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("rw.sqlite");
  int64_t c = 0;
  { ConversationStore s(path); c = s.create_conversation("rw"); }

  constexpr int kWriters = 2, kPerWriter = 60;
  std::atomic<int> writers_done{0};
  std::mutex mu;
  std::vector<std::string> errors;
  auto report = [&](const std::string& e) { std::lock_guard<std::mutex> lock(mu); errors.push_back(e); };
  int reads = 0;
  size_t last_seen = 0;

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      try {
        ConversationStore s(path);  // each thread its own connection
        for (int i = 0; i < kPerWriter; ++i)
          s.add_message(make_message(c, "user", std::to_string(w) + ":" + std::to_string(i), {w, i}));
      } catch (const std::exception& e) {
        report(std::string("writer: ") + e.what());
      }
      ++writers_done;
    });
  threads.emplace_back([&] {
    try {
      ConversationStore s(path);
      // Bounded: stops once both writers are done (one last read), or after 100000 reads.
      for (bool last = false; !last && reads < 100000; ++reads) {
        last = writers_done.load() == kWriters;
        const auto ms = s.messages(c);
        if (ms.size() < last_seen) report("reader saw the message count go backwards");
        last_seen = ms.size();
        // Each writer's messages appear in its own order, complete: no half-written row.
        std::vector<int> next(kWriters, 0);
        for (const auto& m : ms) {
          const int w = m.token_ids.at(0), i = m.token_ids.at(1);
          if (i != next[w]++ || m.text != std::to_string(w) + ":" + std::to_string(i))
            report("reader saw an inconsistent row: " + m.text);
        }
      }
    } catch (const std::exception& e) {
      report(std::string("reader: ") + e.what());
    }
  });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) WARN(e);
  CHECK(errors.empty());
  CHECK(reads > 1);
  CHECK(last_seen == static_cast<size_t>(kWriters * kPerWriter));
}

namespace {

// Child process: appends messages to conversation c forever, reporting each committed count
// (int64, one atomic pipe write) after its commit returns. Never returns.
[[noreturn]] void write_until_killed(const std::string& path, int64_t c, int fd) {
  try {
    ConversationStore s(path);
    for (int64_t i = 0; i < 1'000'000; ++i) {
      s.add_message(make_message(c, "assistant", numbered("m", static_cast<int64_t>(i)), {static_cast<int32_t>(i), 1, 2}));
      const int64_t committed = i + 1;
      if (write(fd, &committed, sizeof committed) != static_cast<ssize_t>(sizeof committed)) _exit(3);
    }
    _exit(0);
  } catch (...) {
    _exit(2);
  }
}

// Reads one int64 report; false on EOF, error, or when nothing arrives within timeout_ms.
bool read_report(int fd, int64_t& value, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  size_t got = 0;
  auto* bytes = reinterpret_cast<char*>(&value);
  while (got < sizeof value) {
    const ssize_t n = read(fd, bytes + got, sizeof value - got);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

TEST_CASE("crash safety: a writer killed with SIGKILL loses no committed message", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("crash.sqlite");
  // Kill after different numbers of commits so the kill lands at different points of a write.
  for (const int64_t kill_after : {3, 17, 40}) {
    INFO("kill after " << kill_after << " commits");
    int64_t c = 0;
    { ConversationStore s(path); c = s.create_conversation("crash"); }  // closed before fork

    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      write_until_killed(path, c, fds[1]);
    }
    close(fds[1]);
    int64_t reported = 0, v = 0;
    while (reported < kill_after && read_report(fds[0], v, 20000)) reported = v;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    // Commits reported between our last read and the kill count too.
    while (read_report(fds[0], v, 0)) reported = v;
    close(fds[0]);
    REQUIRE(reported >= kill_after);
    CHECK(WIFSIGNALED(status));

    ConversationStore s(path);  // opens: no corruption, nothing moved aside
    CHECK_FALSE(s.open_info().recovered_from_corrupt);
    const auto ms = s.messages(c);
    CHECK(static_cast<int64_t>(ms.size()) >= reported);
    CHECK(static_cast<int64_t>(ms.size()) <= reported + 1);  // at most the one in flight
    for (size_t i = 0; i < ms.size(); ++i) {
      CHECK(ms[i].text == numbered("m", static_cast<int64_t>(i)));
      CHECK(ms[i].token_ids == std::vector<int32_t>{static_cast<int32_t>(i), 1, 2});
    }
  }
  RawDb raw(path);
  CHECK(raw.scalar("PRAGMA integrity_check") == "ok");
}

// v2 -> v3: `speedup` held a ratio of total-time tokens/s; it becomes RequestPlanner::compare's
// decode tokens/s ratio, and total_time_ratio is filled beside it, both from the sides' JSON.
TEST_CASE("migrations: version 2 compare runs get the decode speedup and the total-time ratio", "[unit]") {
  TempDir dir;
  const std::string old_path = dir.file("v2.sqlite");
  {
    RawDb raw(old_path);
    raw.exec(kFrozenSchemaV1);
    raw.exec(kFrozenSchemaV2);
    raw.exec("PRAGMA user_version = 2");
    raw.exec(
        "INSERT INTO compare_runs (created_ms, prompt, baseline_json, speculative_json, speedup, identical, "
        "first_diff) VALUES (1, 'p', '{\"tokens_per_s\":10,\"total_ms\":500}', "
        "'{\"tokens_per_s\":40.0,\"total_ms\":200}', 2.5, 1, -1)");
    // Sides without the numbers (or not JSON): 0, "unknown".
    raw.exec(
        "INSERT INTO compare_runs (created_ms, prompt, baseline_json, speculative_json, speedup, identical, "
        "first_diff) VALUES (2, 'q', '{}', NULL, 1.7, 0, 3)");
  }
  ConversationStore store(old_path);
  const auto runs = store.compare_runs();  // newest first
  REQUIRE(runs.size() == 2);
  CHECK(runs[1].speedup == Approx(4.0));
  CHECK(runs[1].total_time_ratio == Approx(2.5));
  CHECK(runs[0].speedup == 0);
  CHECK(runs[0].total_time_ratio == 0);
  CHECK(runs[0].first_diff == 3);

  CompareRecord r;
  r.speedup = 1.25;
  r.total_time_ratio = 1.1;
  r.identical = true;
  const int64_t id = store.save_compare_run(r);
  CHECK(store.compare_runs().front().id == id);
  CHECK(store.compare_runs().front().total_time_ratio == Approx(1.1));
  r.total_time_ratio = -1;
  CHECK(storage_error_kind([&] { store.save_compare_run(r); }) == "invalid");
}
