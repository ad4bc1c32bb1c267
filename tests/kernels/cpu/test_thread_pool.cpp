// The engine's CPU thread pool: every task runs exactly once per region, regions follow each
// other without losing or repeating work (workers spinning, blocked, or late), exceptions reach
// the caller, and a pool of one thread runs serially.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

using specchat::cpu::ThreadPool;

TEST_CASE("thread pool: each task of each region runs exactly once", "[unit][kernels][pool]") {
  for (int n_threads : {1, 2, 3, 8}) {
    ThreadPool pool(n_threads);
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    REQUIRE(pool.n_threads() == std::min(n_threads, cores));
    std::vector<std::atomic<int>> hits(257);
    for (int region = 0; region < 2000; ++region) {
      const int n = 1 + region % 257;
      pool.parallel_for(n, [&](int i) { hits[static_cast<size_t>(i)].fetch_add(1); });
      if (region % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers block
    }
    // Task i ran once in every region with n > i.
    for (int i = 0; i < 257; ++i) {
      int want = 0;
      for (int region = 0; region < 2000; ++region) want += (1 + region % 257) > i ? 1 : 0;
      INFO("threads " << n_threads << " task " << i);
      CHECK(hits[static_cast<size_t>(i)].load() == want);
    }
  }
}

TEST_CASE("thread pool: work is shared and the result is complete when parallel_for returns", "[unit][kernels][pool]") {
  ThreadPool pool(4);
  std::vector<long> out(10000);
  for (int rep = 0; rep < 50; ++rep) {
    std::fill(out.begin(), out.end(), 0);
    pool.parallel_for(100, [&](int c) {
      for (int i = c * 100; i < (c + 1) * 100; ++i) out[static_cast<size_t>(i)] = static_cast<long>(i) * rep;
    });
    long bad = 0;
    for (int i = 0; i < 10000; ++i) bad += out[static_cast<size_t>(i)] != static_cast<long>(i) * rep ? 1 : 0;
    REQUIRE(bad == 0);
  }
}

TEST_CASE("thread pool: a task's exception is rethrown and the pool stays usable", "[unit][kernels][pool]") {
  ThreadPool pool(3);
  std::atomic<int> ran{0};
  CHECK_THROWS_AS(pool.parallel_for(20,
                                    [&](int i) {
                                      ran.fetch_add(1);
                                      if (i == 7) throw std::runtime_error("task 7");
                                    }),
                  std::runtime_error);
  CHECK(ran.load() == 20);  // the other tasks still ran
  std::atomic<int> again{0};
  pool.parallel_for(10, [&](int) { again.fetch_add(1); });
  CHECK(again.load() == 10);
}

TEST_CASE("thread pool: never more threads than cores (regression: --threads 64 on 2 cores decoded 16x slower)",
          "[unit][kernels][pool]") {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CHECK(ThreadPool(64 * cores).n_threads() == cores);
  CHECK(ThreadPool(0).n_threads() == cores);
  CHECK(ThreadPool(1).n_threads() == 1);
}

TEST_CASE("thread pool: the free helper runs serially without a pool", "[unit][kernels][pool]") {
  std::vector<int> order;
  specchat::cpu::parallel_for(nullptr, 5, [&](int i) { order.push_back(i); });
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}
