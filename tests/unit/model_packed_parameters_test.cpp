// pack_parameters: a model's weights become views of one buffer per dtype, each on a 4 KiB page,
// with their values, gradients and outputs unchanged (against a copy of the model that was not
// packed). The none policy's engine packing what it is given: tests/unit/offload_engine_test.cpp.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cstdint>
#include <set>

#include "src/model/model_heads.h"
#include "src/model/model_state.h"
#include "src/model/packed_parameters.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry {
namespace {

CausalLM tiny_model() {
  const ModelShape c = test_support::tiny_llama_config(101, 96);
  CausalLM model(c);
  init_model_weights(*model, c, 0.2, 5);
  return model;
}

// The storages behind `module`'s parameters, and whether each starts at a 4 KiB boundary.
std::set<const void*> storages(torch::nn::Module& module, bool* page_aligned) {
  std::set<const void*> out;
  *page_aligned = true;
  for (const torch::Tensor& p : module.parameters()) {
    out.insert(p.storage().data());
    *page_aligned &= reinterpret_cast<uintptr_t>(p.data_ptr()) % 4096 == 0;
  }
  return out;
}

TEST(PackedParameters, OneAlignedBufferWithTheSameValuesGradientsAndOutputs) {
  CausalLM packed = tiny_model(), plain = tiny_model();
  bool aligned = false;
  ASSERT_GT(storages(*packed, &aligned).size(), 1u);
  pack_parameters(*packed);
  EXPECT_EQ(storages(*packed, &aligned).size(), 1u);
  EXPECT_TRUE(aligned);
  const auto packed_params = packed->named_parameters(), plain_params = plain->named_parameters();
  for (const auto& item : plain_params) {
    const torch::Tensor& p = packed_params[item.key()];
    EXPECT_TRUE(p.requires_grad()) << item.key();
    EXPECT_TRUE(torch::equal(p, item.value())) << item.key();
  }
  const torch::Tensor ids = torch::randint(0, 101, {2, 7});
  const torch::Tensor mask = torch::ones({2, 7}, torch::kLong);
  const torch::Tensor a = packed->forward(ids, mask, torch::Tensor());
  const torch::Tensor b = plain->forward(ids, mask, torch::Tensor());
  EXPECT_TRUE(torch::equal(a, b));
  a.square().mean().backward();
  b.square().mean().backward();
  for (const auto& item : plain_params) {
    EXPECT_TRUE(torch::equal(packed_params[item.key()].grad(), item.value().grad())) << item.key();
  }
  // An in-place update (what AdamW does) lands in the packed weights.
  {
    torch::NoGradGuard no_grad;
    packed_params["model.norm.weight"].add_(1.0);
  }
  EXPECT_TRUE(torch::equal(packed->model->norm->weight, plain->model->norm->weight + 1.0));
}

TEST(PackedParameters, OneBufferPerDtype) {
  CausalLM model = tiny_model();
  model->model->norm->weight.set_data(model->model->norm->weight.to(torch::kBFloat16));
  const torch::Tensor norm = model->model->norm->weight.clone();
  pack_parameters(*model);
  bool aligned = false;
  EXPECT_EQ(storages(*model, &aligned).size(), 2u);
  EXPECT_TRUE(aligned);
  EXPECT_EQ(model->model->norm->weight.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(model->model->norm->weight, norm));
}

TEST(PackedParameters, ATensorListPacksItsCpuTensorsOnly) {
  torch::Tensor a = torch::randn({300, 7}).requires_grad_(true), b = torch::randn({5});
  const torch::Tensor a0 = a.detach().clone(), b0 = b.clone();
  torch::Tensor empty = torch::empty({0});
  pack_parameters(std::vector<torch::Tensor>{a, b, empty});
  EXPECT_EQ(a.storage().data(), b.storage().data());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data_ptr()) - reinterpret_cast<uintptr_t>(a.data_ptr()), 3u * 4096u);
  EXPECT_TRUE(torch::equal(a, a0));
  EXPECT_TRUE(torch::equal(b, b0));
  EXPECT_TRUE(a.requires_grad());
}

}  // namespace
}  // namespace ferry
