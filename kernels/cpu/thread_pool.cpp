// Persistent workers that join each call's job if they are awake for it (spin, then a condition
// variable); ranges are handed out through an atomic cursor so faster threads take more.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#include "core/error.h"

namespace ferry::kernels {
namespace {

// Set while a thread runs ranges for a pool, so nested parallel_for calls run inline instead of
// waiting on workers that are busy with the outer call.
thread_local bool inside_pool = false;

// Ranges per thread: enough that a thread sharing its core with other work hands its share to
// the others, few enough that each range stays long (hundreds of KB) and calls stay cheap.
constexpr int64_t kRangesPerThread = 16;

// Spin this many times on a changing atomic before sleeping: back-to-back calls (one per chunk)
// then skip the futex round trip, while an idle pool costs no CPU.
constexpr int kSpinsBeforeSleep = 4000;

constexpr uint64_t kOpenBit = uint64_t(1) << 32;
constexpr uint64_t kJoinedMask = kOpenBit - 1;
constexpr int kGenerationShift = 33;

inline uint64_t generation_of(uint64_t state) { return state >> kGenerationShift; }

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
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stopping_.store(true);
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
  const uint64_t generation = (generation_of(state_.load(std::memory_order_relaxed)) + 1) & 0x7fffffffu;
  {
    // Under the mutex, so a worker between its check and its sleep cannot miss the new job.
    std::lock_guard<std::mutex> sleep_lock(sleep_mutex_);
    state_.store((generation << kGenerationShift) | kOpenBit, std::memory_order_release);
  }
  wake_.notify_all();

  work_on_current_job();

  // Every range is claimed: close the job, then wait for the workers that joined it to finish.
  uint64_t state = state_.fetch_and(~kOpenBit, std::memory_order_acq_rel) & ~kOpenBit;
  for (int spin = 0; (state & kJoinedMask) != 0; ++spin) {
    if (spin < kSpinsBeforeSleep) {
      cpu_relax();
    } else {
      std::unique_lock<std::mutex> sleep_lock(sleep_mutex_);
      done_.wait(sleep_lock, [this] { return (state_.load(std::memory_order_acquire) & kJoinedMask) == 0; });
    }
    state = state_.load(std::memory_order_acquire);
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
  uint64_t seen = 0;  // generations start at 1
  for (;;) {
    // Wait for a generation this worker has not seen (or for the pool to stop).
    uint64_t state = state_.load(std::memory_order_acquire);
    for (int spin = 0; generation_of(state) == seen && !stopping_.load(std::memory_order_relaxed); ++spin) {
      if (spin < kSpinsBeforeSleep) {
        cpu_relax();
      } else {
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        wake_.wait(lock, [&] {
          return stopping_.load() || generation_of(state_.load(std::memory_order_acquire)) != seen;
        });
      }
      state = state_.load(std::memory_order_acquire);
    }
    if (stopping_.load()) return;
    seen = generation_of(state);
    // Join if the job is still open; a closed one was finished without us.
    bool joined = false;
    while ((state & kOpenBit) && generation_of(state) == seen) {
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    work_on_current_job();
    const uint64_t before = state_.fetch_sub(1, std::memory_order_acq_rel);
    if ((before & kJoinedMask) == 1 && !(before & kOpenBit)) {
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
