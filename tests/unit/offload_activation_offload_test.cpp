// The activation offloader on the emulated device tier: what comes back is what went out, bit for
// bit (any dtype, non-contiguous sources); the host copies are counted in the host tier and not by
// the activation meter; fetching an entry brings back the one offloaded before it, so at most two
// are on the device during a backward-ordered walk; and destroying entries uncounts them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "offload/accountant.h"
#include "offload/activation_meter.h"
#include "offload/activation_offload.h"

namespace ferry::offload {
namespace {

uint64_t host_activations(const MemoryAccountant& accountant) {
  return accountant.current(MemoryTier::host, MemoryCategory::activations);
}

uint64_t device_activations(const MemoryAccountant& accountant) {
  return accountant.current(MemoryTier::device, MemoryCategory::activations);
}

TEST(ActivationOffload, WhatComesBackIsWhatWentOutBitForBit) {
  MemoryAccountant accountant;
  ActivationOffloader offloader(accountant);
  const torch::Tensor fp32 = torch::randn({2, 5, 8});
  const torch::Tensor bf16 = torch::randn({3, 4, 6}).to(torch::kBFloat16);
  const torch::Tensor strided = torch::randn({8, 5}).t();  // not contiguous
  auto a = offloader.offload(fp32);
  auto b = offloader.offload(bf16);
  auto c = offloader.offload(strided);
  EXPECT_EQ(host_activations(accountant), fp32.nbytes() + bf16.nbytes() + strided.nbytes());
  const torch::Tensor c_back = offloader.fetch(*c), b_back = offloader.fetch(*b), a_back = offloader.fetch(*a);
  EXPECT_TRUE(torch::equal(c_back, strided));
  EXPECT_TRUE(torch::equal(b_back, bf16));
  EXPECT_EQ(b_back.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(a_back, fp32));
  EXPECT_EQ(a_back.sizes(), fp32.sizes());
  // A copy, not a view of the host buffer or of the source.
  EXPECT_NE(a_back.data_ptr(), fp32.data_ptr());
}

TEST(ActivationOffload, HostCopiesAreHostTierAndEntriesUncountThemselves) {
  MemoryAccountant accountant;
  ActivationOffloader offloader(accountant);
  const torch::Tensor x = torch::randn({4, 16, 32});  // 8 KiB
  const uint64_t bytes = x.nbytes();
  {
    ActivationMeter meter(accountant);
    auto entry = offloader.offload(x);
    EXPECT_EQ(device_activations(accountant), 0u) << "the host copy is not device memory";
    EXPECT_EQ(host_activations(accountant), bytes);
    torch::Tensor back = offloader.fetch(*entry);
    EXPECT_EQ(device_activations(accountant), bytes) << "the fetched copy is the step's again";
    back.reset();
    EXPECT_EQ(device_activations(accountant), 0u);
    EXPECT_EQ(offloader.host_bytes(), bytes);
  }
  EXPECT_EQ(host_activations(accountant), 0u);
  EXPECT_EQ(offloader.host_bytes(), 0u);
  EXPECT_EQ(offloader.host_peak_bytes(), bytes);
}

TEST(ActivationOffload, FetchingBringsBackThePreviousEntrySoTwoAreOnTheDevice) {
  MemoryAccountant accountant;
  ActivationOffloader offloader(accountant);
  const int64_t layers = 6;
  std::vector<torch::Tensor> inputs;
  std::vector<std::shared_ptr<ActivationOffloader::Entry>> entries;
  for (int64_t i = 0; i < layers; ++i) {
    inputs.push_back(torch::full({2, 8, 16}, static_cast<float>(i)));
    entries.push_back(offloader.offload(inputs.back()));
  }
  const uint64_t one = inputs[0].nbytes();
  ActivationMeter meter(accountant);
  // Backward order: the last layer first. Each fetch hands out its entry and starts the previous.
  for (int64_t i = layers - 1; i >= 0; --i) {
    torch::Tensor back = offloader.fetch(*entries[static_cast<size_t>(i)]);
    EXPECT_TRUE(torch::equal(back, inputs[static_cast<size_t>(i)])) << "layer " << i;
    EXPECT_EQ(device_activations(accountant), (i > 0 ? 2 : 1) * one) << "layer " << i;
  }
  EXPECT_EQ(accountant.peak(MemoryTier::device, MemoryCategory::activations), 2 * one);
  EXPECT_EQ(host_activations(accountant), layers * one);
  entries.clear();
  EXPECT_EQ(host_activations(accountant), 0u);
}

TEST(ActivationOffload, AnEntryCanBeFetchedAgain) {
  // A graph kept for a second backward (retain_graph) fetches the same entry twice.
  MemoryAccountant accountant;
  ActivationOffloader offloader(accountant);
  const torch::Tensor x = torch::randn({3, 7});
  auto entry = offloader.offload(x);
  EXPECT_TRUE(torch::equal(offloader.fetch(*entry), x));
  EXPECT_TRUE(torch::equal(offloader.fetch(*entry), x));
}

}  // namespace
}  // namespace ferry::offload
