// ConnectionPool (app/serve/connection_pool.h): connections that hold their thread (slow clients)
// make the pool grow up to its maximum instead of starving the others; past it they queue; extra
// threads retire when idle; shutdown runs what is queued and joins.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "app/serve/connection_pool.h"

using specchat::serve::ConnectionPool;
using namespace std::chrono_literals;

namespace {

// Tasks that block until released, counting how many run at once.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> running{0}, finished{0};
  std::function<void()> task() {
    return [this] {
      ++running;
      std::unique_lock<std::mutex> l(m);
      cv.wait(l, [&] { return open; });
      --running;
      ++finished;
    };
  }
  void release() {
    {
      std::lock_guard<std::mutex> l(m);
      open = true;
    }
    cv.notify_all();
  }
};

template <typename P>
bool eventually(P p) {
  for (int i = 0; i < 5000 && !p(); ++i) std::this_thread::sleep_for(1ms);
  return p();
}

}  // namespace

TEST_CASE("connection pool: blocked connections make it grow to its maximum, then queue", "[serve]") {
  ConnectionPool pool(2, 6, 10s);
  CHECK(pool.threads() == 2);
  Gate g;
  for (int i = 0; i < 6; ++i) pool.enqueue(g.task());
  REQUIRE(eventually([&] { return g.running.load() == 6; }));  // 6 slow clients, 6 threads
  CHECK(pool.threads() == 6);
  std::atomic<bool> quick{false};
  pool.enqueue([&] { quick = true; });  // a 7th connection past the maximum waits
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(quick.load());
  CHECK(pool.threads() == 6);
  g.release();
  REQUIRE(eventually([&] { return quick.load() && g.finished.load() == 6; }));
  pool.shutdown();
}

TEST_CASE("connection pool: a health check is served while the base threads are held", "[serve]") {
  ConnectionPool pool(2, 64, 10s);
  Gate g;
  for (int i = 0; i < 30; ++i) pool.enqueue(g.task());  // the fresh-user check's 30 slow clients
  REQUIRE(eventually([&] { return g.running.load() == 30; }));
  std::atomic<bool> health{false};
  pool.enqueue([&] { health = true; });
  CHECK(eventually([&] { return health.load(); }));
  g.release();
  pool.shutdown();
  CHECK(g.finished.load() == 30);
}

TEST_CASE("connection pool: extra threads retire when idle, and shutdown runs what is queued", "[serve]") {
  ConnectionPool pool(1, 4, 30ms);
  Gate g;
  for (int i = 0; i < 4; ++i) pool.enqueue(g.task());
  REQUIRE(eventually([&] { return g.running.load() == 4; }));
  g.release();
  CHECK(eventually([&] { return pool.threads() == 1; }));  // back to the base
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) pool.enqueue([&] { ++ran; });
  pool.shutdown();
  CHECK(ran.load() == 20);
  pool.enqueue([&] { ++ran; });  // after shutdown: dropped, not run, no crash
  CHECK(ran.load() == 20);
  CHECK_THROWS_AS(ConnectionPool(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(ConnectionPool(4, 2), std::invalid_argument);
}
