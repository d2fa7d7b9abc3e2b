// Loading and saving Hugging Face model folders.
#include "src/model/pretrained.h"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "src/io/ggml_checkpoint.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_tensor_specs.h"
#include "src/io/int8_checkpoint.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/model_state.h"

namespace ferry {
namespace {

// The folder's weights; a QLoRA checkpoint's NF4, int8 or ggml base (nf4_checkpoint.h,
// int8_checkpoint.h, ggml_checkpoint.h) dequantised (int8 and ggml into fp32; the model converts).
io::TensorMap read_weights(const io::HfWeights& files, const std::filesystem::path& dir) {
  io::TensorMap weights = files.load_all();
  if (io::has_nf4_tensors(weights)) io::dequantize_nf4_tensors(weights, "model folder " + dir.string());
  if (io::has_int8_tensors(weights)) io::dequantize_int8_tensors(weights, "model folder " + dir.string(), at::kFloat);
  if (io::has_ggml_tensors(weights)) io::dequantize_ggml_tensors(weights, "model folder " + dir.string());
  return weights;
}

ModelShape read_config(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) {
    throw InputError("model folder " + dir.string() + " does not exist (expected config.json and *.safetensors)");
  }
  return io::read_hf_config(dir / "config.json");
}

}  // namespace

uint64_t build_bytes_per_parameter(at::ScalarType dtype) {
  return 4 + (dtype == at::kFloat ? 0 : c10::elementSize(dtype));  // float32 first, then converted
}

void check_model_folder(const ModelShape& config, const io::HfWeights& weights, const std::filesystem::path& dir,
                        at::ScalarType dtype) {
  io::check_weights_match_config(config, weights, dir / "config.json");
  io::check_model_fits_host(config, build_bytes_per_parameter(dtype), weights.file_bytes(), "loading model folder " + dir.string());
}

CausalLM causal_lm_from_pretrained(const std::filesystem::path& dir, at::ScalarType dtype, c10::Device device) {
  const ModelShape config = read_config(dir);
  const io::HfWeights files(dir);
  check_model_folder(config, files, dir, dtype);
  CausalLM model(config);
  model->to(dtype);
  LoadStateOptions options;
  options.source = "model folder " + dir.string();
  load_state(*model, read_weights(files, dir), options);
  model->to(device);
  model->eval();
  return model;
}

ScoreModel score_model_from_pretrained(const std::filesystem::path& dir, at::ScalarType dtype, c10::Device device,
                                          bool from_causal_lm, uint64_t seed) {
  const ModelShape config = read_config(dir);
  const io::HfWeights files(dir);
  check_model_folder(config, files, dir, dtype);
  ScoreModel model(config);
  model->to(dtype);
  const io::TensorMap weights = read_weights(files, dir);
  LoadStateOptions options;
  options.source = "model folder " + dir.string();
  const bool init_score = from_causal_lm && weights.count("score.weight") == 0;
  if (from_causal_lm) {
    options.allow_missing = {"score.weight"};
    options.ignore_unexpected = {"lm_head.weight"};
  }
  load_state(*model, weights, options);
  if (init_score) {
    torch::NoGradGuard no_grad;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    model->score->weight.copy_(torch::empty(model->score->weight.sizes(), torch::kFloat).normal_(0.0, 0.02, generator));
  }
  model->to(device);
  model->eval();
  return model;
}

void save_pretrained(const torch::nn::Module& model, const ModelShape& config, const std::filesystem::path& dir,
                     uint64_t max_shard_bytes) {
  std::filesystem::create_directories(dir);
  io::save_hf_weights(dir, state_of(model), max_shard_bytes);
  // A score model is written as a sequence classifier, so AutoModelForSequenceClassification loads it.
  const bool score = dynamic_cast<const ScoreModelImpl*>(&model) != nullptr;
  io::write_hf_config(dir / "config.json", config, score ? io::HfHead::score : io::HfHead::causal_lm);
}

}  // namespace ferry
