// `ferry train-rm`: preference pairs and the pairwise reward loss plugged into the shared loop.
#include "stages/rm.h"

#include <iostream>

#include "core/error.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/model_setup.h"
#include "train/preference/preference_batches.h"
#include "train/preference_losses.h"
#include "train/run_engine.h"
#include "train/run_to_the_end.h"
#include "train/trainer.h"
#include "src/model/family/model_tensors.h"

namespace ferry {

torch::Tensor sequence_rewards(const MicroBatch& batch, const std::string& model_name, ScoreModelImpl& model,
                               BackboneRunner& runner) {
  const torch::Tensor values =
      runner.score(model_name, model, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"));
  return last_token_values(values, batch.at("attention_mask")).to(torch::kFloat);  // (2B)
}

LossSum RewardObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  const torch::Tensor rewards = sequence_rewards(batch, name_, model_, runner);
  const int64_t pairs = batch.loss_weight;
  const torch::Tensor chosen = rewards.narrow(0, 0, pairs), rejected = rewards.narrow(0, pairs, pairs);
  const torch::Tensor losses = reward_pair_losses(chosen, rejected, batch.at("margin"), center_);
  return {losses.sum(), reward_pair_metrics(chosen, rejected)};
}

void run_rm(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  if (config.model.path.empty()) {
    throw ConfigError("model.path: a reward model starts from a Hugging Face folder (an SFT model's final/, any "
                      "causal LM, or a reward model to continue)");
  }
  require_full_precision_base(config, "train-rm");
  if (config.lora.rank > 0 && config.lora.export_as == LoraExport::adapter) {
    throw ConfigError("lora.export: a reward model's score head trains in full, so its final/ is written merged; "
                      "set lora.export=merged");
  }
  const Tokenizer tokenizer(tokenizer_path(config));
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  // Built on the host (the engine places it); a causal LM's lm_head is dropped and the score head drawn.
  ScoreModel model = score_model_from_pretrained(config.model.path, dtype, c10::kCPU, /*from_causal_lm=*/true,
                                                    static_cast<uint64_t>(config.train.seed));
  model->train();
  ModelShape shape = model->config();
  shape.torch_dtype = torch_dtype_name(dtype);
  check_tokenizer_fits(tokenizer, shape);

  PreferenceSplit data = load_preference_split(config, tokenizer, chat_template, "train-rm", std::cout);
  std::cout << "train-rm: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-rm: " << data.eval.size() << " eval pairs; model " << parameter_count(shape) << " parameters on "
            << device.str() << " in " << enum_name(config.train.precision) << "\n";
  prepare_lora(*model, *model->model, config);
  if (config.lora.rank > 0) model->score->weight.set_requires_grad(true);

  auto engine = make_run_engine(config, shape, device, std::cout);
  const std::string name = "reward";
  engine->add_model(name, offload::group_parameters(*model, /*trainable_only=*/false), /*trainable=*/true);
  model->to(device);  // the buffers; the parameters are where the engine put them

  PreferenceBatchSource source(std::move(data.train), std::move(data.eval),
                               PreferenceBatchSource::Options::from_config(config, stage_pad_id(shape, tokenizer)));
  RewardObjective objective(name, *model, config.rm.center_rewards_coefficient);
  Trainer trainer(config, *engine, source, objective, stage_trained_model(name, *model, shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-rm", "pairs", {"accuracy", "rewards/gap"});
}

}  // namespace ferry
