// A model's parameters <-> a name->tensor map with Hugging Face names (what safetensors files
// hold), and initialisation from scratch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/model_shape.h"
#include "src/io/safetensors.h"

namespace ferry {

struct LoadStateOptions {
  std::string source = "checkpoint";       // named in error messages (a folder or file)
  std::vector<std::string> allow_missing;  // parameter names that may be absent (kept as they are)
  std::vector<std::string> ignore_unexpected;  // tensor names in the map that are not parameters
};

// Copies every tensor of `tensors` into the parameter of the same name, converting dtype and
// device to the parameter's. Checks everything first and reports ALL missing, unexpected and
// shape-mismatched names together in one InputError; nothing is copied then. Always ignored:
// `*.rotary_emb.inv_freq` buffers, and `lm_head.weight` when the model ties it to the embedding.
void load_state(torch::nn::Module& model, const io::TensorMap& tensors, const LoadStateOptions& options = {});

// Every parameter by its Hugging Face name: detached tensors sharing the parameters' storage
// (copy or save them before changing the model). QLoRA's NF4 projections (nf4_linear.h) appear as
// bitsandbytes names them (src/io/nf4_checkpoint.h), int8 ones as bnb names a Linear8bitLt's
// (src/io/int8_checkpoint.h), a GGUF base's ggml blocks as src/io/ggml_checkpoint.h says. load_state
// reads such groups back into NF4 / int8 / ggml weights (quantises a float tensor given for an NF4 or
// int8 one, dequantises a group given for a float weight); quantised weights are written before the
// other checks, so a failing load may have changed them.
io::TensorMap state_of(const torch::nn::Module& model);

// Hugging Face's initialisation: Linear and Embedding weights ~ N(0, std), biases 0, norm weights
// 1, and the embedding row of pad_token_id (if any) 0. Deterministic for a given seed on any
// device (drawn on the CPU).
void init_model_weights(torch::nn::Module& model, const ModelShape& config, double std = 0.02, uint64_t seed = 0);

}  // namespace ferry
