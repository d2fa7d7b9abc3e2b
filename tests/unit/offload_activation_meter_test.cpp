// The activation meter: what it counts (this thread's allocations while it lives), what it does
// not (handed-over tensors, paused work, other threads, memory from before it), and that it leaves
// the accountant as it found it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "offload/accountant.h"
#include "offload/activation_meter.h"

namespace ferry::offload {
namespace {

uint64_t activations(const MemoryAccountant& accountant) {
  return accountant.current(MemoryTier::device, MemoryCategory::activations);
}

TEST(ActivationMeter, CountsThisThreadsAllocationsUntilFreed) {
  MemoryAccountant accountant;
  ActivationMeter meter(accountant);
  torch::Tensor a = torch::empty({1000}, torch::kFloat);
  EXPECT_EQ(activations(accountant), 4000u);
  torch::Tensor b = torch::empty({250}, torch::kDouble);
  EXPECT_EQ(activations(accountant), 6000u);
  EXPECT_EQ(meter.live_bytes(), 6000u);
  a.reset();
  EXPECT_EQ(activations(accountant), 2000u);
  b.reset();
  EXPECT_EQ(activations(accountant), 0u);
  EXPECT_EQ(accountant.peak(MemoryTier::device, MemoryCategory::activations), 6000u);
  EXPECT_EQ(accountant.peak(MemoryTier::device), 6000u);
}

TEST(ActivationMeter, HandedOverPausedForeignAndOlderMemoryIsNotCounted) {
  MemoryAccountant accountant;
  torch::Tensor older = torch::empty({500}, torch::kFloat);
  ActivationMeter meter(accountant);
  older.reset();  // allocated before the meter: its release is not the meter's
  EXPECT_EQ(activations(accountant), 0u);

  torch::Tensor taken = torch::empty({100}, torch::kFloat);
  ActivationMeter::hand_over(taken);
  EXPECT_EQ(activations(accountant), 0u);
  taken.reset();
  EXPECT_EQ(activations(accountant), 0u);

  torch::Tensor paused;
  {
    const ActivationMeter::Pause pause;
    paused = torch::empty({100}, torch::kFloat);
  }
  EXPECT_EQ(activations(accountant), 0u);
  paused.reset();

  torch::Tensor foreign;
  std::thread([&] { foreign = torch::empty({100}, torch::kFloat); }).join();
  EXPECT_EQ(activations(accountant), 0u);
  EXPECT_EQ(accountant.peak(MemoryTier::device), 400u);  // only `taken` was ever counted, until handed over
}

TEST(ActivationMeter, ReleasesWhatIsStillLiveWhenItEnds) {
  MemoryAccountant accountant;
  torch::Tensor kept;
  {
    ActivationMeter meter(accountant);
    kept = torch::empty({64}, torch::kFloat);
    EXPECT_EQ(activations(accountant), 256u);
  }
  EXPECT_EQ(activations(accountant), 0u);
  EXPECT_EQ(accountant.peak(MemoryTier::device), 256u);
  kept.reset();  // freed after the meter: nothing to uncount, nothing breaks
  EXPECT_EQ(activations(accountant), 0u);
}

TEST(ActivationMeter, CountsAutogradsBackward) {
  MemoryAccountant accountant;
  const torch::Tensor w = torch::randn({256, 256}, torch::requires_grad());
  const torch::Tensor x = torch::randn({64, 256});
  ActivationMeter meter(accountant);
  {
    torch::Tensor y = torch::tanh(torch::matmul(x, w)).sum();  // saves (64, 256) activations
    EXPECT_GE(activations(accountant), 64u * 256u * 4u);
    y.backward();
  }
  // w's gradient (256 × 256 fp32) is still live and still counted: nobody took it over.
  EXPECT_EQ(activations(accountant), 256u * 256u * 4u);
  ActivationMeter::hand_over(w.grad());
  EXPECT_EQ(activations(accountant), 0u);
  EXPECT_GE(accountant.peak(MemoryTier::device, MemoryCategory::activations), 2u * 64u * 256u * 4u);
}

}  // namespace
}  // namespace ferry::offload
