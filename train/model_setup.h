// How a stage sets up its model: finding the tokenizer, loading the model it starts from, LoRA
// set-up, how a trained model is saved and resumed (TrainedModel), and the LoRA export of final/.
// Stage files stay small by calling these.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine.h"
#include "src/model/model_heads.h"
#include "train/trainer.h"

namespace ferry {

class Tokenizer;

// tokenizer.path, else the model.path folder (its tokenizer.model, else its tokenizer.json).
std::string tokenizer_path(const Config& config);

// Throws InputError when the tokenizer has more tokens than the model's vocabulary.
void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelShape& shape);

// The padding id batches use: the model's pad_token_id, else the tokenizer's, else 0.
int64_t stage_pad_id(const ModelShape& shape, const Tokenizer& tokenizer);

// The dtype name config.json records for weights of `dtype`.
std::string torch_dtype_name(at::ScalarType dtype);

struct LoadedCausalLm {
  CausalLM model{nullptr};
  ModelShape shape;  // torch_dtype set to the run's precision
};

// model.path (a Hugging Face folder), else model.config (initialised from train.seed), built on the
// host in `dtype`, in training mode. Throws ConfigError when neither is set. With lora.quantize_base
// nf4 or int8 the decoder projections are quantised (src/model/quantized_base.h): tensor by tensor
// while a folder is read (or taken as the folder stores them), or right after initialisation from
// scratch.
LoadedCausalLm load_causal_lm(const Config& config, at::ScalarType dtype);

// Throws ConfigError naming lora.quantize_base when it is set: `stage` cannot train on a quantised base yet.
void require_full_precision_base(const Config& config, const std::string& stage);

// With lora.rank > 0: attaches adapters to `backbone` (src/model/lora.h, A drawn from train.seed) and
// freezes every other weight of `model`, so the engine keeps optimizer state for the adapters only.
void prepare_lora(torch::nn::Module& model, DecoderModelImpl& backbone, const Config& config);
inline void prepare_lora(CausalLMImpl& model, const Config& config) { prepare_lora(model, *model.model, config); }

// How a stage saves and resumes its model (a causal LM or a score model). save: config.json +
// weights (with LoRA: base weights and adapters together, plus adapter_config.json, which makes
// step-N exact to resume and lets `ferry export` merge it or cut the adapter out) +
// the tokenizer's files (Tokenizer::files(): tokenizer.model, or tokenizer.json with its
// tokenizer_config.json, chat templates and additional_chat_templates/). load: the weights of such a
// folder into the live model.
TrainedModel stage_trained_model(const std::string& name, torch::nn::Module& model, const ModelShape& shape,
                                 const Config& config, const Tokenizer& tokenizer);

// With LoRA, rewrites output.dir/final (saved by the trainer as a checkpoint) in lora.export's
// format, through `ferry export`'s code: `merged` a plain Hugging Face folder, `adapter` a PEFT
// adapter folder (adapter_config.json + adapter_model.safetensors + tokenizer.model).
void export_lora_final(const std::filesystem::path& final_dir, const Config& config);

}  // namespace ferry
