// ConversationStore: finish reasons of replies (stored, refused when unknown, exported and
// imported) and read-only detection (a write-protected database says so at open; writes throw).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "storage/conversation_store.h"
#include "storage/export.h"
#include "storage_test_util.h"

using namespace specchat;
using namespace specchat::test;

TEST_CASE("store: every finish reason round trips, an unknown one is refused", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("reasons");
  const std::vector<std::string> reasons = {"length", "eos", "stop", "cancelled", "context_full", ""};
  for (const std::string& r : reasons) {
    Message m = make_message(c, "assistant", "reply " + r, {1, 2});
    m.finish = r;
    store.add_message(m);
  }
  const auto ms = store.messages(c);
  REQUIRE(ms.size() == reasons.size());
  for (size_t i = 0; i < reasons.size(); ++i) CHECK(ms[i].finish == reasons[i]);

  Message bad = make_message(c, "assistant", "x");
  bad.finish = "error";
  CHECK(storage_error_kind([&] { store.add_message(bad); }) == "invalid");
  CHECK(store.messages(c).size() == reasons.size());

  // JSON export keeps it; import restores it.
  const std::string json = export_json(*store.conversation(c), store.all_messages(c));
  const int64_t copy = import_json(store, json);
  const auto copied = store.messages(copy);
  REQUIRE(copied.size() == reasons.size());
  for (size_t i = 0; i < reasons.size(); ++i) CHECK(copied[i].finish == reasons[i]);
}

TEST_CASE("store: a read-only database opens for reading and says it is read-only", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("chat.sqlite");
  int64_t c = 0;
  {
    ConversationStore store(path);
    CHECK_FALSE(store.read_only());
    c = store.create_conversation("kept");
    store.add_message(make_message(c, "user", "hello"));
  }
  auto check_read_only = [&](const std::string& open_path) {
    ConversationStore store(open_path);
    CHECK(store.read_only());
    REQUIRE(store.messages(c).size() == 1);
    CHECK(storage_error_kind([&] { store.add_message(make_message(c, "user", "lost?")); }) == "io");
    CHECK(storage_error_kind([&] { store.rename_conversation(c, "renamed"); }) == "io");
  };
  SECTION("opened through a mode=ro URI") { check_read_only("file:" + path + "?mode=ro"); }
  SECTION("an immutable file (chattr +i)") {
    // Root ignores permission bits, so the immutable flag is what makes a file read-only for
    // every user; a file system or container without it skips visibly.
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    int flags = 0;
    const bool set = ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0 &&
                     (flags |= FS_IMMUTABLE_FL, ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0);
    if (!set) {
      WARN("SKIPPED: cannot set the immutable flag here (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)");
    } else {
      check_read_only(path);
      flags &= ~FS_IMMUTABLE_FL;
      ioctl(fd, FS_IOC_SETFLAGS, &flags);
    }
    ::close(fd);
  }
  ConversationStore again(path);
  CHECK(again.messages(c).size() == 1);  // nothing was half-written
}

TEST_CASE("store: regenerated replies are alternatives of one place, switching keeps one active", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("alts");
  store.add_message(make_message(c, "user", "q1"));
  const int64_t a1 = store.add_message(make_message(c, "assistant", "a1", {1}));
  const int64_t a2 = store.add_message_replacing(a1, make_message(c, "assistant", "a2", {2}));
  const int64_t u2 = store.add_message(make_message(c, "user", "q2"));
  const int64_t b1 = store.add_message(make_message(c, "assistant", "b1", {3}));
  auto ids = [](const std::vector<Message>& ms) {
    std::vector<int64_t> out;
    for (const Message& m : ms) out.push_back(m.id);
    return out;
  };
  CHECK(ids(store.alternatives(a2)) == std::vector<int64_t>{a1, a2});
  CHECK(ids(store.alternatives(a1)) == std::vector<int64_t>{a1, a2});
  CHECK(ids(store.alternatives(b1)) == std::vector<int64_t>{b1});
  CHECK(ids(store.alternatives(u2)) == std::vector<int64_t>{u2});  // never edited: itself only
  CHECK(store.alternatives(9999).empty());

  CHECK(storage_error_kind([&] { store.switch_alternative(a2, b1); }) == "invalid");  // another place
  CHECK(storage_error_kind([&] { store.switch_alternative(a1, a2); }) == "invalid");  // a1 is not active
  store.switch_alternative(a2, a1);
  auto path = store.messages(c);
  REQUIRE(path.size() == 2);  // a1's own branch: nothing followed it
  CHECK(path[1].id == a1);
  store.switch_alternative(a1, a2);  // back: a2 with the turns that followed it
  path = store.messages(c);
  REQUIRE(path.size() == 4);
  CHECK(path[1].id == a2);
  CHECK(path[3].id == b1);
}
