// BackgroundWorker: one thread that runs submitted jobs in submission order, so the offload engine
// can update parameter chunks on the CPU while the main thread is still running backward.
// wait() blocks until every job submitted so far is done and rethrows the first exception a job
// threw (later jobs after a failure are dropped). Torch-free.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace ferry::offload {

class BackgroundWorker {
 public:
  BackgroundWorker();
  ~BackgroundWorker();  // waits for the queued jobs (their exceptions are dropped), then joins
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  void submit(std::function<void()> job);
  void wait();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;
};

}  // namespace ferry::offload
