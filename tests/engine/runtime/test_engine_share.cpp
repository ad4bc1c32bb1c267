// Two engines sharing one model pair from two threads (EngineShare: disjoint KV sequence ranges,
// one TurnLock), as the app's chat and the server started from its Settings do: each sequence's
// output equals decoding it alone, one engine's cache operations leave the other's sequences
// alone, and the turn lock serves waiters in arrival order.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/model.h"
#include "engine/model_fixture.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/turn_lock.h"
#include "engine/speculative/drafter.h"
#include "engine/speculative/ngram_drafter.h"

using namespace specchat;

namespace {

// The bundled pair with a pool of 3 sequences: 1 for the "chat", 2 for the "server".
ModelPair& shared_pair() {
  static ModelPair pair = [] {
    PairOptions o;
    o.target_path = test::target_model();
    o.draft_path = test::draft_model();
    o.n_seq = 3;
    return ModelPair::load(o);
  }();
  return pair;
}

GenerateRequest request(const ModelPair& mp, const std::string& prompt, int max_tokens, int draft_k,
                        TreeMode mode = TreeMode::chain) {
  GenerateRequest r;
  r.prompt = mp.encode_prompt(prompt);
  r.max_tokens = max_tokens;
  r.spec.draft_k = draft_k;
  if (mode == TreeMode::dynamic) {
    r.spec.tree.mode = TreeMode::dynamic;
    r.spec.tree.node_budget = 12;
    r.spec.tree.depth = 4;
    r.spec.tree.branch = 3;
  }
  return r;
}

// Decoded alone on the single-sequence bundled pair, cold.
GenerationResult alone(const GenerateRequest& r) {
  ModelPair& mp = test::bundled_pair();
  Generator g(*mp.target, mp.draft.get());
  g.clear_cache();
  return g.generate(r);
}

}  // namespace

TEST_CASE("turn lock: a caller that unlocks and locks again queues behind the one waiting", "[engine]") {
  TurnLock lock;
  std::vector<int> order;
  std::mutex om;
  lock.lock();
  std::thread other([&] {
    lock.lock();
    {
      std::lock_guard<std::mutex> l(om);
      order.push_back(2);
    }
    lock.unlock();
  });
  // Wait (bounded) until the other thread holds a ticket behind ours.
  for (int i = 0; i < 20000 && lock.queued() < 2; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  REQUIRE(lock.queued() == 2);
  lock.unlock();
  lock.lock();  // a decode loop taking its next turn
  {
    std::lock_guard<std::mutex> l(om);
    order.push_back(1);
  }
  lock.unlock();
  other.join();
  CHECK(order == std::vector<int>{2, 1});
  CHECK(lock.queued() == 0);
}

TEST_CASE("engine share: ranges outside the pool are refused", "[model][engine]") {
  ModelPair& mp = shared_pair();
  CHECK_THROWS_AS(Engine(*mp.target, mp.draft.get(), EngineShare{2, 2, nullptr}), std::invalid_argument);
  CHECK_THROWS_AS(Engine(*mp.target, mp.draft.get(), EngineShare{0, 0, nullptr}), std::invalid_argument);
  CHECK_THROWS_AS(Engine(*mp.target, mp.draft.get(), EngineShare{-1, 1, nullptr}), std::invalid_argument);
  CHECK_THROWS_AS(Engine(*mp.target, mp.draft.get(), EngineShare{3, -1, nullptr}), std::invalid_argument);
  CHECK(Engine(*mp.target, mp.draft.get(), EngineShare{1, -1, nullptr}).capacity() == 2);
  CHECK(Engine(*mp.target, mp.draft.get()).capacity() == 3);
}

TEST_CASE("engine share: feature drafter factories are called with the engine's KV sequences", "[model][engine]") {
  ModelPair& mp = shared_pair();
  Engine e(*mp.target, mp.draft.get(), EngineShare{1, 2, nullptr});
  std::vector<int> slots;
  e.set_drafter_factory(DrafterKind::mtp, [&](int slot) {
    slots.push_back(slot);
    return std::make_unique<NgramDrafter>();
  });
  CHECK(slots == std::vector<int>{1, 2});
}

TEST_CASE("engine share: a chat engine and a server engine on two threads each equal decoding alone",
          "[model][engine]") {
  ModelPair& mp = shared_pair();
  TurnLock turns;
  const EngineShare chat_share{0, 1, &turns};
  Generator chat(*mp.target, mp.draft.get(), &chat_share);
  Engine server(*mp.target, mp.draft.get(), EngineShare{1, 2, &turns});
  chat.clear_cache();
  server.clear_cache();

  const GenerateRequest c1 = request(mp, "Once upon a time, there was a little girl named Lily.", 48, 3);
  const GenerateRequest s1 = request(mp, "Tom had a red ball. He liked to play with it in the park every day. One day", 40, 4,
                                     TreeMode::dynamic);
  const GenerateRequest s2 = request(mp, "The cat sat", 40, 0);
  GenerationResult got_c1, got_c2, got_s1, got_s2;
  GenerateRequest c2;
  std::thread chat_thread([&] {
    got_c1 = chat.generate(c1);
    // The next turn continues the first: its prefix is still in the chat's sequence although the
    // server ran (and cleared its own idle slots) meanwhile.
    c2 = c1;
    c2.prompt.insert(c2.prompt.end(), got_c1.tokens.begin(), got_c1.tokens.end());
    const std::vector<int32_t> more = mp.tokenizer->encode(" Then", false);
    c2.prompt.insert(c2.prompt.end(), more.begin(), more.end());
    c2.max_tokens = 24;
    got_c2 = chat.generate(c2);
  });
  std::thread server_thread([&] {
    const Engine::SeqId a = server.submit(s1);
    const Engine::SeqId b = server.submit(s2);
    while (server.step() > 0) {
    }
    got_s1 = server.take(a);
    got_s2 = server.take(b);
    server.clear_cache();
  });
  chat_thread.join();
  server_thread.join();

  CHECK(got_c1.tokens == alone(c1).tokens);
  CHECK(got_c1.stats.n_drafted > 0);
  CHECK(got_s1.tokens == alone(s1).tokens);
  CHECK(got_s2.tokens == alone(s2).tokens);
  CHECK(got_c2.tokens == alone(c2).tokens);
  CHECK(got_c2.stats.n_prompt_cached >= static_cast<int>(c1.prompt.size()));
}
