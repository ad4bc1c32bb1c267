#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace specchat::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// How long a worker spins for the next region before it blocks: long enough to bridge the
// serial gaps between the matmuls of one forward (norms, attention: a few µs), short enough
// that an idle engine sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  // More threads than cores only adds descheduled workers for the others to wait on (measured:
  // --threads 64 on 2 cores decoded 16x slower): capped at the core count.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads = n_threads <= 0 ? cores : std::min(n_threads, cores);
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_tasks() {
  for (;;) {
    const uint64_t v = claim_.fetch_add(1);
    const int n = static_cast<int>((v >> 24) & 0xFFFFFF);
    const int i = static_cast<int>(v & 0xFFFFFF);
    if (i >= n) return;
    try {
      (*fn_.load())(i);
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu_);
      if (!error_) error_ = std::current_exception();
    }
    if (done_.fetch_add(1) + 1 == n) {
      std::lock_guard<std::mutex> lk(mu_);  // pairs with the caller's wait
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next region, then block.
    const auto t0 = std::chrono::steady_clock::now();
    while (generation_.load(std::memory_order_acquire) == seen) {
      cpu_relax();
      if (std::chrono::steady_clock::now() - t0 > kSpin) {
        std::unique_lock<std::mutex> lk(mu_);
        sleeping_.fetch_add(1);
        wake_.wait(lk, [&] { return generation_.load() != seen; });
        sleeping_.fetch_sub(1);
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
    }
    run_tasks();
  }
}

void ThreadPool::parallel_for(int n_tasks, const std::function<void(int)>& fn) {
  if (n_tasks <= 0) return;
  if (n_tasks >= (1 << 24)) throw std::invalid_argument("ThreadPool::parallel_for: too many tasks");
  {
    std::lock_guard<std::mutex> lk(mu_);
    done_.store(0);
    fn_.store(&fn);
    ++region_;
    claim_.store((static_cast<uint64_t>(region_) << 48) | (static_cast<uint64_t>(n_tasks) << 24));
    error_ = nullptr;
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleeping_.load() > 0) wake_.notify_all();
  run_tasks();
  // Wait for tasks other threads still hold: spin briefly, then block.
  const auto t0 = std::chrono::steady_clock::now();
  while (done_.load(std::memory_order_acquire) < n_tasks) {
    cpu_relax();
    if (std::chrono::steady_clock::now() - t0 > kSpin) {
      std::unique_lock<std::mutex> lk(mu_);
      done_cv_.wait(lk, [&] { return done_.load() >= n_tasks; });
      break;
    }
  }
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    e = error_;
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace specchat::cpu
