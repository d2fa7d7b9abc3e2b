// A small persistent pool of worker threads for splitting one hot CPU loop (the AdamW update,
// conversions) across cores. Workers are started once and sleep between calls, so a call costs a
// wake-up (microseconds), not thread creation: the offload engine calls it once per parameter
// chunk while the next chunk's gradients are still arriving.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ferry::kernels {

class ThreadPool {
 public:
  // num_threads counts the calling thread, which always works too: ThreadPool(1) starts no
  // workers and runs everything inline. 0 means one thread per core (offload.cpu_threads: 0).
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return int(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint ranges that together cover [0, n) exactly once, and returns
  // when all are done. Every range starts at a multiple of `grain` and is a multiple of `grain`
  // long except the last, so a caller can keep ranges SIMD- and cache-line aligned; the pool picks
  // a few ranges per thread so a core slowed by other work does not hold up the rest. Small
  // problems (n <= grain) and calls made from inside fn run inline on the calling thread. An
  // exception thrown by fn is rethrown here (the first one, after every range has finished).
  template <class Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n, grain, &fn, [](void* f, int64_t begin, int64_t end) { (*static_cast<F*>(f))(begin, end); });
  }

 private:
  using RangeFn = void (*)(void* fn, int64_t begin, int64_t end);
  void run(int64_t n, int64_t grain, void* fn, RangeFn call);
  void work_on_current_job();
  void worker_loop();

  std::vector<std::thread> workers_;
  std::mutex callers_;  // one parallel_for at a time; others wait here

  // The current job. Its fields are written before state_ publishes it and stay unchanged until
  // every worker that joined it has left, so a joined worker reads them without locks.
  void* job_fn_ = nullptr;
  RangeFn job_call_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_range_ = 0;
  int64_t job_ranges_ = 0;
  std::atomic<int64_t> next_range_{0};
  // [generation: 31 bits][open: 1 bit][joined workers: 32 bits]. A worker joins only an open job
  // of a generation it has not seen; the caller closes the job once every range is claimed and
  // then waits only for the workers that joined, so a worker descheduled by other load on the
  // machine never delays a call (the caller runs its share instead).
  std::atomic<uint64_t> state_{0};
  std::atomic<bool> stopping_{false};
  // Workers spin on state_ briefly, then sleep on wake_ (a condition variable rather than
  // atomic::wait, whose GCC 12 implementation can miss wake-ups).
  std::mutex sleep_mutex_;
  std::condition_variable wake_;  // workers: a new job (or stop)
  std::condition_variable done_;  // caller: the last joined worker left a closed job
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// A process-wide pool with one thread per core, created at first use. For code that has no pool
// of its own; the offload engine makes its own from offload.cpu_threads.
ThreadPool& default_thread_pool();

}  // namespace ferry::kernels
