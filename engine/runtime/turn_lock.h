// TurnLock: a first-come, first-served lock for engines that share one model pair (the app's
// chat and its OpenAI-compatible server, EngineShare in engine.h).
//
// Each Engine call that runs the models (submit, step, clear_cache) holds the lock for that one
// call, so two engines on two threads take turns step by step. A plain std::mutex would let a
// thread that unlocks and at once locks again (a decode loop) take it back before the waiting
// thread wakes, starving the other engine; a ticket lock serves waiters in arrival order, so a
// looping thread queues behind the one already waiting. Meets BasicLockable (std::lock_guard).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace specchat {

class TurnLock {
 public:
  // Blocks until every caller that arrived earlier has had its turn.
  void lock() {
    std::unique_lock<std::mutex> l(m_);
    const uint64_t ticket = next_++;
    cv_.wait(l, [&] { return serving_ == ticket; });
  }
  // Ends the caller's turn (the caller must hold it).
  void unlock() {
    {
      std::lock_guard<std::mutex> l(m_);
      ++serving_;
    }
    cv_.notify_all();
  }
  // Callers holding the lock or waiting for it (for tests and diagnostics).
  int queued() const {
    std::lock_guard<std::mutex> l(m_);
    return static_cast<int>(next_ - serving_);
  }

 private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  uint64_t next_ = 0;     // the next ticket handed out
  uint64_t serving_ = 0;  // the ticket whose turn it is
};

}  // namespace specchat
