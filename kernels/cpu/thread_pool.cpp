// Persistent workers woken per call through a generation counter (spin, then a condition
// variable); ranges are handed out through an atomic cursor so faster threads take more.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#include "src/core/error.h"

namespace ferry::kernels {
namespace {

// Set while a thread runs ranges for a pool, so nested parallel_for calls run inline instead of
// waiting on workers that are busy with the outer call.
thread_local bool inside_pool = false;

// Ranges per thread: enough that a thread sharing its core with other work hands its share to
// the others, few enough that each range stays long (hundreds of KB) and calls stay cheap.
constexpr int64_t kRangesPerThread = 4;

// Spin this many times on a changing atomic before sleeping: back-to-back calls (one per chunk)
// then skip the futex round trip, while an idle pool costs no CPU.
constexpr int kSpinsBeforeSleep = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(size_t(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true);
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::run(int64_t n, int64_t grain, void* fn, RangeFn call) {
  FERRY_CHECK(n >= 0 && grain > 0, "parallel_for(n=", n, ", grain=", grain, ")");
  if (n == 0) return;
  if (workers_.empty() || n <= grain || inside_pool) {
    call(fn, 0, n);
    return;
  }
  std::lock_guard<std::mutex> lock(callers_);
  const int64_t wanted_ranges = int64_t(num_threads()) * kRangesPerThread;
  const int64_t grains = (n + grain - 1) / grain;
  const int64_t range = ((grains + wanted_ranges - 1) / wanted_ranges) * grain;
  job_fn_ = fn;
  job_call_ = call;
  job_n_ = n;
  job_range_ = range;
  job_ranges_ = (n + range - 1) / range;
  next_range_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  workers_busy_.store(int(workers_.size()), std::memory_order_relaxed);
  {
    // Under the mutex, so a worker between its check and its sleep cannot miss the change.
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();

  work_on_current_job();

  // Wait for every worker to leave the job, so none touches job_* after we return.
  for (int spin = 0; workers_busy_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinsBeforeSleep) {
      cpu_relax();
    } else {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      done_.wait(lock, [this] { return workers_busy_.load(std::memory_order_acquire) == 0; });
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::work_on_current_job() {
  inside_pool = true;
  for (;;) {
    const int64_t index = next_range_.fetch_add(1, std::memory_order_relaxed);
    if (index >= job_ranges_) break;
    const int64_t begin = index * job_range_;
    const int64_t end = std::min(begin + job_range_, job_n_);
    try {
      job_call_(job_fn_, begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
  inside_pool = false;
}

void ThreadPool::worker_loop() {
  // Not generation_.load(): a job published before this thread got here must still be seen as new.
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; generation_.load(std::memory_order_acquire) == seen; ++spin) {
      if (spin < kSpinsBeforeSleep) {
        cpu_relax();
      } else {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stopping_.load()) return;
    work_on_current_job();
    if (workers_busy_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(sleep_mutex_);  // pairs with the caller's check-then-sleep
      done_.notify_one();
    }
  }
}

ThreadPool& default_thread_pool() {
  static ThreadPool pool(0);
  return pool;
}

}  // namespace ferry::kernels
