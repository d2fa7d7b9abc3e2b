// BackgroundWorker: a single-thread job queue (offload/background_worker.h).
#include "offload/background_worker.h"

namespace ferry::offload {

BackgroundWorker::BackgroundWorker() : thread_([this] { run(); }) {}

BackgroundWorker::~BackgroundWorker() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return jobs_.empty() && !busy_; });
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void BackgroundWorker::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void BackgroundWorker::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  if (failure_) {
    std::exception_ptr failure = failure_;
    failure_ = nullptr;
    std::rethrow_exception(failure);
  }
}

void BackgroundWorker::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    if (failure_) {  // a job failed: drop the rest until wait() reports it
      if (jobs_.empty()) idle_.notify_all();
      continue;
    }
    busy_ = true;
    lock.unlock();
    try {
      job();
    } catch (...) {
      lock.lock();
      failure_ = std::current_exception();
      busy_ = false;
      if (jobs_.empty()) idle_.notify_all();
      continue;
    }
    lock.lock();
    busy_ = false;
    if (jobs_.empty()) idle_.notify_all();
  }
}

}  // namespace ferry::offload
