#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
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

// The shortest interval between two moves of one worker: when the pool has more threads than
// free CPUs (a loaded machine) collisions cannot be avoided, and moving costs two system calls.
constexpr int64_t kMoveEveryNs = 2'000'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int usable_cpu_count() {
#if defined(__linux__)
  cpu_set_t m;
  if (sched_getaffinity(0, sizeof m, &m) == 0 && CPU_COUNT(&m) > 0) return CPU_COUNT(&m);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int n_threads) {
  // More threads than cores only adds descheduled workers for the others to wait on (measured:
  // --threads 64 on 2 cores decoded 16x slower): capped at the usable CPUs.
  const int cores = usable_cpu_count();
  n_threads = n_threads <= 0 ? cores : std::min(n_threads, cores);
  cpus_ = std::vector<CpuSlot>(static_cast<size_t>(n_threads));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

void ThreadPool::note_cpu(int slot) {
#if defined(__linux__)
  const int me = sched_getcpu();
  if (me < 0) return;
  CpuSlot& mine = cpus_[static_cast<size_t>(slot)];
  mine.cpu.store(me, std::memory_order_relaxed);
  if (slot == 0) return;  // the caller stays where the scheduler puts it; workers make way
  bool shared = false;
  for (size_t s = 0; s < cpus_.size() && !shared; ++s) {
    shared = static_cast<int>(s) != slot && cpus_[s].cpu.load(std::memory_order_relaxed) == me;
  }
  if (!shared) return;
  const int64_t t = now_ns();
  if (t - mine.last_move_ns < kMoveEveryNs) return;
  mine.last_move_ns = t;
  // The process's CPUs (its main thread's set, read now, so a limit set on the running process,
  // e.g. `taskset -a -p`, holds) that no pool thread is on: setting the affinity to them makes
  // the kernel move this thread now; setting it back leaves it there and free to move again.
  cpu_set_t all, to;
  if (sched_getaffinity(getpid(), sizeof all, &all) != 0) return;
  to = all;
  for (const CpuSlot& cs : cpus_) {
    const int c = cs.cpu.load(std::memory_order_relaxed);
    if (c >= 0 && c < CPU_SETSIZE) CPU_CLR(c, &to);
  }
  if (CPU_COUNT(&to) == 0) return;
  if (pthread_setaffinity_np(pthread_self(), sizeof to, &to) != 0) return;
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
  mine.cpu.store(sched_getcpu(), std::memory_order_relaxed);
#else
  (void)slot;
#endif
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true);
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
      failed_.store(true);
    }
    // The last task: wake the caller only if it blocked (it sets caller_waiting_ under mu_
    // before checking done_, so either it sees this count or this sees its flag).
    if (done_.fetch_add(1) + 1 == n && caller_waiting_.load() != 0) {
      { std::lock_guard<std::mutex> lk(mu_); }
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::worker_loop(int slot) {
  uint64_t seen = 0;
  for (;;) {
    // Spin briefly for the next region, then block. A worker spinning on the caller's CPU takes
    // that CPU from the caller, so it checks where it runs now and then.
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned spins = 0; generation_.load(std::memory_order_acquire) == seen; ++spins) {
      cpu_relax();
      if (spins % 64 == 63) note_cpu(slot);
      if (std::chrono::steady_clock::now() - t0 > kSpin) {
        std::unique_lock<std::mutex> lk(mu_);
        sleeping_.fetch_add(1);
        wake_.wait(lk, [&] { return generation_.load() != seen; });
        sleeping_.fetch_sub(1);
        break;
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    note_cpu(slot);
    run_tasks();
  }
}

void ThreadPool::parallel_for(int n_tasks, const std::function<void(int)>& fn) {
  if (n_tasks <= 0) return;
  // Each thread's last, failed claim adds one to the 24-bit index too: the index must stay below
  // 2^24 with all of them, or it carries into the task count and tasks run twice.
  if (static_cast<int64_t>(n_tasks) + n_threads() >= (int64_t{1} << 24)) {
    throw std::invalid_argument("ThreadPool::parallel_for: too many tasks");
  }
  // No lock on the way in: every task of the last region has finished (done_ reached its count),
  // so no thread writes error_ now; done_ and fn_ are stored before the claim word (a worker
  // still leaving the last region may claim a task of this one and must see this fn_), and
  // workers that spin read them after seeing the new generation.
  error_ = nullptr;
  done_.store(0);
  fn_.store(&fn);
  ++region_;
  claim_.store((static_cast<uint64_t>(region_) << 48) | (static_cast<uint64_t>(n_tasks) << 24));
  generation_.fetch_add(1);
  note_cpu(0);
  // A worker going to sleep counts itself in sleeping_, then checks generation_, under mu_: it
  // sees the new generation, or this sees its count; taking mu_ here means it is either not yet
  // at its check or already waiting, so the notification is not lost.
  if (sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lk(mu_); }
    wake_.notify_all();
  }
  run_tasks();
  // Wait for tasks other threads still hold: spin briefly, then block.
  const auto t0 = std::chrono::steady_clock::now();
  while (done_.load(std::memory_order_acquire) < n_tasks) {
    cpu_relax();
    if (std::chrono::steady_clock::now() - t0 > kSpin) {
      std::unique_lock<std::mutex> lk(mu_);
      caller_waiting_.store(1);
      done_cv_.wait(lk, [&] { return done_.load() >= n_tasks; });
      caller_waiting_.store(0);
      break;
    }
  }
  if (!failed_.load()) return;
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    e = error_;
    failed_.store(false);
  }
  if (e) std::rethrow_exception(e);
}

namespace {

// One lane's remaining chunks [front, back) in one word, so an owner taking the front and a
// thief taking the back never both get the last chunk.
struct alignas(64) Lane {
  std::atomic<uint64_t> fb{0};
  int lo = 0, len = 0, n = 0;  // the lane's global range [lo, lo + len) in n chunks
  int bound(int i) const { return lo + static_cast<int>(static_cast<int64_t>(len) * i / n); }
  // The chunk index taken, or -1 when the lane is empty.
  int take(bool from_back) {
    uint64_t v = fb.load(std::memory_order_relaxed);
    for (;;) {
      const uint32_t f = static_cast<uint32_t>(v >> 32), b = static_cast<uint32_t>(v);
      if (f >= b) return -1;
      const uint64_t nv = from_back ? ((static_cast<uint64_t>(f) << 32) | (b - 1)) : ((static_cast<uint64_t>(f + 1) << 32) | b);
      if (fb.compare_exchange_weak(v, nv, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        return static_cast<int>(from_back ? b - 1 : f);
      }
    }
  }
};

}  // namespace

void parallel_ranges(ThreadPool* pool, int total, int chunks_per_lane, const std::function<void(int, int)>& fn) {
  if (total <= 0) return;
  const int n_lanes = pool ? std::min(pool->n_threads(), total) : 1;
  if (n_lanes <= 1) {
    fn(0, total);
    return;
  }
  // Up to 16 lanes on the stack (a region per product: no allocation in the decode loop).
  constexpr int kInline = 16;
  Lane inline_lanes[kInline];
  std::vector<Lane> heap_lanes(n_lanes > kInline ? static_cast<size_t>(n_lanes) : 0);
  Lane* lanes = n_lanes > kInline ? heap_lanes.data() : inline_lanes;
  for (int l = 0; l < n_lanes; ++l) {
    Lane& ln = lanes[l];
    ln.lo = static_cast<int>(static_cast<int64_t>(total) * l / n_lanes);
    ln.len = static_cast<int>(static_cast<int64_t>(total) * (l + 1) / n_lanes) - ln.lo;
    ln.n = std::max(1, std::min(chunks_per_lane, ln.len));
    ln.fb.store(static_cast<uint64_t>(ln.n), std::memory_order_relaxed);
  }
  pool->parallel_for(n_lanes, [&](int t) {
    for (int i; (i = lanes[t].take(false)) >= 0;) {
      const Lane& ln = lanes[t];
      fn(ln.bound(i), ln.bound(i + 1));
    }
    for (int k = 1; k < n_lanes; ++k) {  // steal: the next lanes in turn, each from its back
      Lane& ln = lanes[(t + k) % n_lanes];
      for (int i; (i = ln.take(true)) >= 0;) fn(ln.bound(i), ln.bound(i + 1));
    }
  });
}

}  // namespace specchat::cpu
