// PIPO latent-format history in the store (schema 7, docs/design/pipo.md): a PIPO reply's pair
// sequence round-trips exactly, bad sequences are refused, and a conversation continued from
// SQLite after a restart decodes exactly as the uninterrupted run (greedy).
#include <catch2/catch.hpp>

#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_release.h"
#include "engine/pipo/pipo_fixture.h"
#include "storage/conversation_store.h"

using namespace specchat;

namespace {

int64_t conversation_with_reply(ConversationStore& s, const std::vector<int32_t>& reply_raw, int64_t* reply_id) {
  const int64_t c = s.create_conversation("pipo", "");
  Message u;
  u.conversation_id = c;
  u.role = "user";
  u.text = "hello";
  s.add_message(u);
  Message a;
  a.conversation_id = c;
  a.role = "assistant";
  a.text = "reply";
  a.token_ids = reply_raw;
  *reply_id = s.add_message(a);
  return c;
}

}  // namespace

TEST_CASE("store: a PIPO reply's pair sequence round-trips, bad ones are refused", "[unit][storage][pipo]") {
  ConversationStore s(":memory:");
  int64_t reply = 0;
  conversation_with_reply(s, {20, 21, 22}, &reply);
  CHECK_FALSE(s.message_latents(reply));
  const MessageLatents l{"rel-1", {1, 3, 10, kPairPad, 20, kPairPad, 21, 22}};
  s.set_message_latents(reply, l);
  const auto back = s.message_latents(reply);
  REQUIRE(back);
  CHECK(back->release == "rel-1");
  CHECK(back->pairs == l.pairs);
  // Replaced by a newer sequence for the same message.
  s.set_message_latents(reply, MessageLatents{"rel-2", {1, 3}});
  CHECK(s.message_latents(reply)->release == "rel-2");
  auto code = [&](const MessageLatents& bad, int64_t id) {
    try {
      s.set_message_latents(id, bad);
    } catch (const StorageError& e) {
      return e.kind();
    }
    return std::string("stored");
  };
  CHECK(code({"", {1, 3}}, reply) == "invalid");
  CHECK(code({"r", {}}, reply) == "invalid");
  CHECK(code({"r", {1, 3, 4}}, reply) == "invalid");
  CHECK(code({"r", {kPairPad, 3}}, reply) == "invalid");
  CHECK(code({"r", {1, -7}}, reply) == "invalid");
  CHECK(code({"r", {1, 3}}, reply + 100) == "not_found");
  CHECK(s.message_latents(reply)->pairs == std::vector<int32_t>{1, 3});  // nothing lost
}

TEST_CASE("store: latents go with their message", "[unit][storage][pipo]") {
  ConversationStore s(":memory:");
  int64_t reply = 0;
  const int64_t c = conversation_with_reply(s, {20}, &reply);
  s.set_message_latents(reply, MessageLatents{"rel", {1, 20}});
  s.delete_conversation(c);
  CHECK_FALSE(s.message_latents(reply));
}

TEST_CASE("store: a PIPO conversation continued from SQLite equals the uninterrupted run", "[model][storage][pipo]") {
  test::PipoFixture f;
  f.write();
  PipoLoadOptions o;
  o.backbone.n_ctx = 64;
  o.backbone.n_seq = 2;
  o.backbone.n_threads = 1;
  PipoUnit u = load_pipo_release(f.dir.path.string(), o);
  PipoGenerateOptions g;
  g.max_tokens = 9;
  g.settings.acceptance_threshold = 0.4f;
  const std::vector<int32_t> turn1_raw = {1, 3, 523, 1207, 88, 6, 4};  // odd: one PAD
  const std::vector<int32_t> turn2_raw = {6, 3, 77, 91, 6, 4};          // what the template adds next
  // Uninterrupted: one session, turn 2 continues the session's own pairs.
  PipoSession live(u, 0);
  const PipoReply r1 = pipo_generate(live, pair_align_ids(turn1_raw), g);
  std::vector<int32_t> history = pair_align_ids(turn1_raw);
  history.insert(history.end(), r1.new_pairs.begin(), r1.new_pairs.end());
  std::vector<int32_t> full = pairs_to_raw(history);
  full.insert(full.end(), turn2_raw.begin(), turn2_raw.end());
  const PipoReply r2_live = pipo_generate(live, *continue_pairs(history, full), g);
  // Interrupted: the reply and its latents stored, the store closed and reopened, a new session.
  const std::string db = f.dir.file("chat.sqlite");
  int64_t reply = 0;
  {
    ConversationStore s(db);
    conversation_with_reply(s, r1.raw, &reply);
    s.set_message_latents(reply, MessageLatents{u.info.release, history});
  }
  ConversationStore reopened(db);
  const auto stored = reopened.message_latents(reply);
  REQUIRE(stored);
  const PipoContinuation plan = plan_pipo_turn(&stored->pairs, stored->release, false, u.info.release, full);
  REQUIRE(plan.from_latents);
  PipoSession fresh(u, 1);
  const PipoReply r2 = pipo_generate(fresh, plan.pairs, g);
  CHECK(r2.reused_pairs == 0);
  CHECK(r2.new_pairs == r2_live.new_pairs);
  CHECK(r2.raw == r2_live.raw);
  // Re-pairing the raw history instead gives the backbone other latents (when a PAD was kept
  // inside it): the design's reason for storing pairs.
  if (pair_align_ids(full) != plan.pairs) {
    PipoSession repaired(u, 1);
    const PipoReply r2_raw = pipo_generate(repaired, pair_align_ids(full), g);
    CHECK(r2_raw.prompt_pairs != r2.prompt_pairs);
  }
}
