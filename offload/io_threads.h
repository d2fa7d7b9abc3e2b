// IoThreads: a small pool of threads that run blocking IO jobs (the NVMe tier's reads and writes)
// so that several are in flight while the CPU optimizer computes. submit() returns a future;
// get() on it waits and rethrows the job's exception. Jobs start in submission order. Torch-free.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry::offload {

class IoThreads {
 public:
  explicit IoThreads(int threads);
  ~IoThreads();  // runs what is queued, then joins
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  std::future<void> submit(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ferry::offload
