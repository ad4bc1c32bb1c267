// The HTTP server's connection threads (cpp-httplib's TaskQueue): a connection holds a thread
// from accept to close, reading, waiting for its reply and writing it. With a fixed pool, a few
// dozen clients that send their request a byte at a time (each byte within --read-timeout) hold
// every thread, and /health and real requests wait for them (found by a fresh-user check: 30
// such connections stopped the server answering). This pool keeps `base` threads and starts
// more whenever a connection arrives with none idle, up to `max`; extra threads retire after
// `idle` without work. Past `max` connections wait in a FIFO queue. What is left of the attack
// needs `max` slow connections at once (a reverse proxy with per-client limits is the answer
// for an exposed server).
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace specchat::serve {

class ConnectionPool : public httplib::TaskQueue {
 public:
  // base ≥ 1 threads always (started now), at most max ≥ base. std::invalid_argument otherwise.
  ConnectionPool(size_t base, size_t max, std::chrono::milliseconds idle = std::chrono::seconds(10));
  ~ConnectionPool() override;  // shutdown() if it was not called
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // Runs fn on an idle thread, a new one (below max), or queues it.
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins every thread. Later enqueues are dropped.
  void shutdown() override;

  // Threads alive now (for tests and the log).
  size_t threads() const;

 private:
  struct Worker {
    std::thread t;
    bool done = false;
  };
  void spawn();  // under m_
  void run(Worker* self);

  const size_t base_, max_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<Worker> workers_;  // stable addresses; finished ones are joined and erased on spawn
  size_t live_ = 0, idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace specchat::serve
