// The engine's CPU thread pool: every task runs exactly once per region, regions follow each
// other without losing or repeating work (workers spinning, blocked, or late), exceptions reach
// the caller, and a pool of one thread runs serially. parallel_ranges covers its range exactly
// once and lets an idle thread take a stalled one's chunks. A worker that finds itself on the
// caller's CPU moves to another one (Linux).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

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

// The CPUs this process may run on (its affinity mask; all cores without one).
static int usable_cpus() {
#if defined(__linux__)
  cpu_set_t m;
  if (sched_getaffinity(0, sizeof m, &m) == 0) return std::max(1, CPU_COUNT(&m));
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("thread pool: never more threads than cores (regression: --threads 64 on 2 cores decoded 16x slower)",
          "[unit][kernels][pool]") {
  const int cores = usable_cpus();
  CHECK(ThreadPool(64 * cores).n_threads() == cores);
  CHECK(ThreadPool(0).n_threads() == cores);
  CHECK(ThreadPool(1).n_threads() == 1);
}

TEST_CASE("thread pool: the free helper runs serially without a pool", "[unit][kernels][pool]") {
  std::vector<int> order;
  specchat::cpu::parallel_for(nullptr, 5, [&](int i) { order.push_back(i); });
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("thread pool: parallel_ranges covers every index exactly once", "[unit][kernels][pool]") {
  for (int n_threads : {1, 2, 3, 8}) {
    ThreadPool pool(n_threads);
    for (int total : {1, 2, 3, 7, 16, 100, 1001}) {
      for (int per_lane : {1, 3, 8, 2000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(total));
        std::atomic<int> calls{0}, empty{0};
        specchat::cpu::parallel_ranges(&pool, total, per_lane, [&](int g0, int g1) {
          calls.fetch_add(1);
          if (g0 >= g1) empty.fetch_add(1);
          for (int i = g0; i < g1; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        INFO("threads " << n_threads << " total " << total << " chunks per lane " << per_lane);
        int bad = 0;
        for (int i = 0; i < total; ++i) bad += hits[static_cast<size_t>(i)].load() != 1 ? 1 : 0;
        CHECK(bad == 0);
        CHECK(empty.load() == 0);
        // At most one lane per thread, at most per_lane chunks per lane.
        CHECK(calls.load() <= std::min(pool.n_threads(), total) * per_lane);
      }
    }
  }
  std::vector<int> serial;
  specchat::cpu::parallel_ranges(nullptr, 10, 4, [&](int g0, int g1) { serial.push_back(g1 - g0); });
  CHECK(serial == std::vector<int>{10});  // no pool: one call over everything
}

TEST_CASE("thread pool: parallel_ranges lets an idle thread take a stalled thread's chunks", "[unit][kernels][pool]") {
  ThreadPool pool(2);
  if (pool.n_threads() < 2) {
    WARN("SKIPPED: one core, so no second thread can take the stalled lane's chunks");
    return;
  }
  // 2 lanes of 8 chunks. The thread that takes chunk [0, 1) (the front of lane 0) stalls until
  // every other chunk has run: only stealing from lane 0's back lets that happen (without it the
  // stalled thread would have to run them itself, after the wait times out).
  std::atomic<int> others{0};
  std::atomic<bool> all_ran{false};
  specchat::cpu::parallel_ranges(&pool, 16, 8, [&](int g0, int g1) {
    if (g0 == 0) {
      const auto t0 = std::chrono::steady_clock::now();
      while (others.load() < 15 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      all_ran = others.load() == 15;
    } else {
      others.fetch_add(g1 - g0);
    }
  });
  CHECK(all_ran.load());
}

#if defined(__linux__)
namespace {
void pin_self(int cpu) {
  cpu_set_t m;
  CPU_ZERO(&m);
  CPU_SET(cpu, &m);
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof m, &m) == 0);
}
void busy_for(std::chrono::microseconds d) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < d) {
  }
}
}  // namespace

// Regression: on this project's 2-vCPU VMs the scheduler often woke the worker onto the engine
// thread's CPU and left it there; then one thread ran every task of every region while the other
// waited (the same build decoded the bundled target at 860-1060 or 1600-1860 tokens/s from one
// process start to the next).
TEST_CASE("thread pool: a worker on the caller's CPU moves to another one (regression: bimodal decode speed)",
          "[unit][kernels][pool]") {
  cpu_set_t before;
  REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0);
  ThreadPool pool(2);
  if (pool.n_threads() < 2 || CPU_COUNT(&before) < 2) {
    WARN("SKIPPED: fewer than two usable CPUs, so there is no other CPU to move to");
    return;
  }
  int c = 0;
  while (!CPU_ISSET(c, &before)) ++c;
  pin_self(c);
  // Put the worker on the caller's CPU: it pins itself there from inside a task.
  const auto me = std::this_thread::get_id();
  std::atomic<bool> worker_pinned{false};
  const auto t0 = std::chrono::steady_clock::now();
  while (!worker_pinned.load() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20)) {
    pool.parallel_for(2, [&](int) {
      if (std::this_thread::get_id() != me) {
        if (!worker_pinned.load()) pin_self(c);
        worker_pinned = true;
      } else {
        busy_for(std::chrono::microseconds(200));
      }
    });
  }
  REQUIRE(worker_pinned.load());
  // From its next region on the worker shares CPU c with the caller: it must move off it.
  std::atomic<int> worker_cpu{c};
  const auto t1 = std::chrono::steady_clock::now();
  while (worker_cpu.load() == c && std::chrono::steady_clock::now() - t1 < std::chrono::seconds(20)) {
    pool.parallel_for(2, [&](int) {
      if (std::this_thread::get_id() != me) {
        worker_cpu = sched_getcpu();
      } else {
        busy_for(std::chrono::microseconds(200));
      }
    });
  }
  CHECK(worker_cpu.load() != c);
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof before, &before) == 0);
}
#else
TEST_CASE("thread pool: a worker on the caller's CPU moves to another one (regression: bimodal decode speed)",
          "[unit][kernels][pool]") {
  WARN("SKIPPED: CPU placement is only managed on Linux");
}
#endif
