// BackgroundWorker: jobs run in submission order on one other thread; wait() returns when all
// are done and rethrows the first failure, after which queued jobs are dropped until it is
// reported; the worker is usable again afterwards; the destructor finishes queued jobs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "offload/background_worker.h"

namespace ferry::offload {
namespace {

TEST(BackgroundWorker, RunsJobsInOrderOnAnotherThread) {
  BackgroundWorker worker;
  std::vector<int> order;
  std::atomic<bool> other_thread{true};
  const std::thread::id caller = std::this_thread::get_id();
  for (int i = 0; i < 100; ++i) {
    worker.submit([&, i] {
      if (std::this_thread::get_id() == caller) other_thread = false;
      std::this_thread::sleep_for(std::chrono::microseconds(i % 3 == 0 ? 50 : 0));
      order.push_back(i);
    });
  }
  worker.wait();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_TRUE(other_thread);
}

TEST(BackgroundWorker, WaitRethrowsTheFirstFailureAndDropsTheRest) {
  BackgroundWorker worker;
  std::atomic<int> ran{0};
  worker.submit([&] { ++ran; });
  worker.submit([] { throw std::runtime_error("first"); });
  worker.submit([] { throw std::runtime_error("second"); });
  worker.submit([&] { ++ran; });
  try {
    worker.wait();
    FAIL() << "wait() did not rethrow";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "first");
  }
  EXPECT_EQ(ran, 1);
  // Reported once; the worker goes on.
  worker.submit([&] { ++ran; });
  EXPECT_NO_THROW(worker.wait());
  EXPECT_EQ(ran, 2);
}

TEST(BackgroundWorker, DestructorFinishesQueuedJobs) {
  std::atomic<int> ran{0};
  {
    BackgroundWorker worker;
    for (int i = 0; i < 10; ++i) {
      worker.submit([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        ++ran;
      });
    }
  }
  EXPECT_EQ(ran, 10);
}

}  // namespace
}  // namespace ferry::offload
