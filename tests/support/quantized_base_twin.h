// LoRA on a quantised frozen base against LoRA on its dequantised twin (the same float weights as a
// plain model): one forward/backward of a tiny Llama gives the same loss and adapter gradients, and
// the base gets none. Shared by tests/unit/model_nf4_linear_test.cpp and model_int8_linear_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "core/config/config.h"
#include "src/io/safetensors.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/quantized_base.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry::quantized_test {

// The tiny Llama these checks use: vocabulary 300, 2 layers, hidden 64, GQA.
inline ModelShape tiny_shape() {
  return test_support::tiny_llama_config(
      {.vocab_size = 300, .intermediate_size = 96, .max_position_embeddings = 64, .rms_norm_eps = 1e-6});
}

// `kind` quantises a model of `shape` (vocabulary 300, 2 layers); `dequantize` turns its state_of
// tensors back into float weights for the twin. The base then costs about `bytes_per_weight`.
inline void expect_lora_matches_dequantized_twin(const ModelShape& shape, BaseQuantization kind, bool double_quant,
                                                 const std::function<void(io::TensorMap&)>& dequantize,
                                                 double bytes_per_weight, double bytes_tolerance) {
  torch::set_num_threads(1);
  LoraConfig lora;
  lora.rank = 4;
  lora.alpha = 8;
  lora.target_modules = {"q_proj", "v_proj", "down_proj"};
  CausalLM qlora(shape);
  init_model_weights(*qlora, shape, 0.05, 1);
  quantize_base(*qlora->model, kind, double_quant);
  CausalLM twin(shape);
  io::TensorMap dequantized = state_of(*qlora);
  dequantize(dequantized);
  load_state(*twin, dequantized);
  for (auto* m : {&qlora, &twin}) {
    apply_lora(*(*m)->model, lora, 9);
    freeze_base_weights(**m);
    torch::NoGradGuard no_grad;
    for (auto& item : (*m)->named_parameters()) {
      if (item.key().find("lora_B") != std::string::npos) item.value().fill_(0.03);
    }
  }
  const QuantizedBaseSize size = quantized_base_size(*qlora);
  EXPECT_EQ(size.projections, 2 * 7);
  EXPECT_NEAR(size.bytes_per_weight(), bytes_per_weight, bytes_tolerance);
  const torch::Tensor ids = torch::randint(0, 300, {2, 9});
  std::vector<torch::Tensor> losses;
  for (auto* m : {&qlora, &twin}) {
    const torch::Tensor logits = (*m)->forward(ids);
    const torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 300}), ids.reshape({-1}));
    loss.backward();
    losses.push_back(loss.detach());
  }
  EXPECT_NEAR(losses[0].item<double>(), losses[1].item<double>(), 1e-5);
  const auto twin_params = twin->named_parameters();
  int adapters = 0;
  for (const auto& item : qlora->named_parameters()) {
    const bool adapter = item.key().find("lora_") != std::string::npos;
    EXPECT_EQ(item.value().grad().defined(), adapter) << item.key();
    if (!adapter) continue;
    ++adapters;
    EXPECT_LE((item.value().grad() - twin_params[item.key()].grad()).abs().max().item<double>(), 1e-5) << item.key();
  }
  EXPECT_EQ(adapters, 2 * 3 * 2);
}

// Merging LoRA adapters (on o_proj) into a model whose base is `kind` dequantises the targeted
// projections only (`quantized` says whether a projection still is) and keeps the outputs (1e-5).
inline void expect_merging_dequantises_the_targeted_projections(
    BaseQuantization kind, const std::function<bool(const torch::nn::LinearImpl&)>& quantized) {
  const ModelShape shape = tiny_shape();
  CausalLM model(shape);
  init_model_weights(*model, shape, 0.05, 4);
  quantize_base(*model->model, kind, false);
  LoraConfig lora;
  lora.rank = 2;
  lora.target_modules = {"o_proj"};
  apply_lora(*model->model, lora, 1);
  const torch::Tensor ids = torch::randint(0, 300, {1, 6});
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find("lora_B") != std::string::npos) item.value().fill_(0.02);
  }
  const torch::Tensor before = model->forward(ids);
  merge_lora(*model->model);
  EXPECT_FALSE(quantized(*model->model->decoder_layers[0]->self_attn->o_proj));
  EXPECT_TRUE(quantized(*model->model->decoder_layers[0]->self_attn->q_proj));
  EXPECT_LE((model->forward(ids) - before).abs().max().item<double>(), 1e-5);
}

}  // namespace ferry::quantized_test
