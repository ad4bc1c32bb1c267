#include "app/serve/connection_pool.h"

#include <stdexcept>
#include <string>

namespace specchat::serve {

ConnectionPool::ConnectionPool(size_t base, size_t max, std::chrono::milliseconds idle)
    : base_(base), max_(max), idle_timeout_(idle) {
  if (base < 1 || max < base) {
    throw std::invalid_argument("ConnectionPool: need 1 <= base <= max (got " + std::to_string(base) + ", " +
                                std::to_string(max) + ")");
  }
  std::lock_guard<std::mutex> l(m_);
  for (size_t i = 0; i < base_; ++i) spawn();
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::spawn() {
  // Join and forget threads that retired (they have exited: join returns at once).
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done) {
      if (it->t.joinable()) it->t.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  workers_.emplace_back();
  Worker* w = &workers_.back();
  ++live_;
  w->t = std::thread([this, w] { run(w); });
}

void ConnectionPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> l(m_);
  if (shutdown_) return;
  jobs_.push_back(std::move(fn));
  // Idle threads each take one job; start one more when the queue outgrows them.
  if (jobs_.size() > idle_ && live_ < max_) spawn();
  cv_.notify_one();
}

void ConnectionPool::run(Worker* self) {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(m_);
      ++idle_;
      const bool woken = cv_.wait_for(l, idle_timeout_, [&] { return shutdown_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) {
        // Shutting down, or idle for long while above the base: this thread ends.
        if (shutdown_ || (!woken && live_ > base_)) {
          --live_;
          self->done = true;
          return;
        }
        continue;
      }
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void ConnectionPool::shutdown() {
  std::list<Worker> all;
  {
    std::lock_guard<std::mutex> l(m_);
    shutdown_ = true;
  }
  cv_.notify_all();
  {
    // Every thread drains the queue and then ends; spawn() no longer runs (shutdown_), so the
    // list only shrinks from here.
    std::lock_guard<std::mutex> l(m_);
    all.splice(all.end(), workers_);
  }
  for (Worker& w : all) {
    if (w.t.joinable()) w.t.join();
  }
}

size_t ConnectionPool::threads() const {
  std::lock_guard<std::mutex> l(m_);
  return live_;
}

}  // namespace specchat::serve
