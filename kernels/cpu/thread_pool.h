// The engine's CPU thread pool, handed to the kernels (cpu::linear, cpu::matmul).
//
// Why not OpenMP: a desktop engine shares its cores. libgomp's team spins at every barrier
// waiting for each thread; when another program holds a core, a descheduled team member stalls
// the whole forward for a scheduler quantum. Measured on the 2-core machine with a build
// running: the bundled target's one-row forward took 203 ms instead of 2 ms (OMP_WAIT_POLICY=
// passive: 12 ms). This pool instead
//   - hands out work in small chunks from an atomic counter, and the calling thread works too,
//     so a descheduled worker only delays the chunk it holds, never the others' share;
//   - lets workers spin briefly (about 50 µs) for the next parallel region, then block on a
//     condition variable, so an idle engine costs no CPU;
//   - (Linux) keeps its threads on different CPUs without pinning them: a worker that finds itself
//     on the CPU another pool thread last ran on moves to one of the process's CPUs (its main
//     thread's set, read at that moment, so `taskset -a -p` on a running engine holds) that no
//     pool thread is on (its affinity set to those for one call, then back to the process's),
//     at most once per 2 ms; with none free it stays. Without it, on 2-vCPU
//     VMs whose kernel sees no shared cache, the scheduler often woke the worker onto the engine
//     thread's CPU and left it there: one thread then ran every region while the other waited,
//     and the bundled target decoded at 860-1060 or 1600-1860 tokens/s from one process start to
//     the next (docs/perf/cpu.md, 2026-12-05).
// Not reentrant: parallel_for must not be called from inside a task, and one thread at a time
// uses a pool (the engine thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specchat::cpu {

class ThreadPool {
 public:
  // n_threads threads in all, the caller included (n_threads - 1 workers); <= 0 = all cores;
  // capped at usable_cpu_count() at construction (so `taskset -c 0` gives one thread).
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs fn(i) for every i in [0, n_tasks) on the pool and the calling thread; returns when all
  // have run. n_tasks + n_threads() < 2^24 (std::invalid_argument otherwise). Tasks may run in any order and on any thread. An exception thrown by a task is
  // rethrown here (the first one; the remaining tasks still run).
  void parallel_for(int n_tasks, const std::function<void(int)>& fn);

 private:
  void worker_loop(int slot);
  void run_tasks();
  // Records the CPU this thread (slot 0 = the caller, i = worker i) runs on; a worker that shares
  // it with another pool thread moves off it (Linux; no-op elsewhere).
  void note_cpu(int slot);
  std::vector<std::thread> workers_;
  // Per slot: the CPU that thread last ran on (-1 unknown), on its own cache line.
  struct alignas(64) CpuSlot {
    std::atomic<int> cpu{-1};
    int64_t last_move_ns = 0;  // steady clock, written by the slot's own thread
  };
  std::vector<CpuSlot> cpus_;
  std::mutex mu_;
  std::condition_variable wake_, done_cv_;
  std::atomic<uint64_t> generation_{0};  // bumped per parallel region
  // The claim word: region tag (16 bits) | task count (24 bits) | next index (24 bits). One
  // fetch_add gives a thread an index together with the task count of the SAME region, so a
  // worker still leaving an old region can never run a task of the next one (index >= count).
  // A claimed index < count keeps its region current (the caller waits for it), so fn_ (stored
  // before the claim word) is that region's function.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0}, sleeping_{0};
  // The caller blocks on done_cv_ (after its spin) with this set; the thread finishing a region's
  // last task takes mu_ and notifies only then, so a region whose caller still spins costs no
  // lock. (Each side writes its flag, then reads the other's: one of them sees the other.)
  std::atomic<int> caller_waiting_{0};
  std::atomic<const std::function<void(int)>*> fn_{nullptr};
  uint16_t region_ = 0;
  std::exception_ptr error_;  // written under mu_ by a failing task; reset between regions
  std::atomic<bool> failed_{false};  // error_ was set this region (the caller locks only then)
  std::atomic<bool> stop_{false};
};

// The CPUs the calling thread may run on: on Linux the count of its affinity mask (what taskset,
// cgroup cpusets and containers leave it), elsewhere std::thread::hardware_concurrency(); >= 1.
// The engine's thread counts (the pool's, the calibration's) are capped at it.
int usable_cpu_count();

// Runs fn(i) for i in [0, n_tasks) on `pool`, or serially on this thread when pool is null or
// has one thread.
inline void parallel_for(ThreadPool* pool, int n_tasks, const std::function<void(int)>& fn) {
  if (pool && pool->n_threads() > 1 && n_tasks > 1) {
    pool->parallel_for(n_tasks, fn);
  } else {
    for (int i = 0; i < n_tasks; ++i) fn(i);
  }
}

// Runs fn(g0, g1) over disjoint ranges that cover [0, total) exactly once, on `pool` (serially,
// as one call fn(0, total), when pool is null or has one thread, or total < 2).
// The range is cut into one contiguous lane per thread, each lane into `chunks_per_lane` chunks.
// Task t takes its own lane's chunks front to back, so each thread streams through contiguous
// memory (hardware and software prefetch run ahead of it into its own next chunk); a thread
// whose lane is empty steals chunks from the back of the others' lanes, so a descheduled thread
// delays only the chunk it holds (the robustness of parallel_for's small chunks). Measured on
// one-row q4_K products over matrices beyond the caches (2 threads, scripts/bench-linear-stream.cpp,
// docs/perf/cpu.md): 512 × 2048, 25 GB/s with 16 chunks handed out from one counter, 37-39 by
// lanes (with the range-head prefetch of cpu::linear).
// Errors: as parallel_for (a task's exception reaches the caller after the region).
void parallel_ranges(ThreadPool* pool, int total, int chunks_per_lane, const std::function<void(int, int)>& fn);

}  // namespace specchat::cpu
