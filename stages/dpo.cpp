// `ferry train-dpo`: preference pairs and the DPO-family losses plugged into the shared loop.
#include "stages/dpo.h"

#include <iostream>
#include <sstream>

#include "core/error.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "stages/online_dpo.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/model_setup.h"
#include "train/preference/preference_batches.h"
#include "train/preference_losses.h"
#include "train/preference/reference_model.h"
#include "train/run_to_the_end.h"
#include "train/trainer.h"
#include "src/model/family/model_tensors.h"

namespace fs = std::filesystem;

namespace ferry {

ReferenceSource resolve_reference(const Config& config) {
  return resolve_reference_source(config.dpo.reference, config.dpo.reference_model, uses_reference(config.dpo.loss_type),
                                  config.lora.rank > 0, "dpo");
}

namespace {

std::string loss_names(const DpoConfig& s) {
  std::ostringstream names;
  for (size_t k = 0; k < s.loss_type.size(); ++k) {
    if (k > 0) names << " + ";
    if (!s.loss_weights.empty()) names << s.loss_weights[k] << " x ";
    names << enum_name(s.loss_type[k]);
  }
  return names.str();
}

}  // namespace

DpoObjective::DpoObjective(const DpoConfig& settings, ReferenceSource source, std::string policy_name,
                           CausalLMImpl& policy, std::string reference_name, CausalLMImpl* reference)
    : settings_(settings), models_(source, std::move(policy_name), policy, std::move(reference_name), reference) {}

LossSum DpoObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  // The reference first, so that no autograd graph is alive while it runs.
  const double ld_alpha = settings_.ld_alpha;
  torch::Tensor reference = models_.reference_logps(batch, runner, ld_alpha);  // (2B); undefined without one
  const int64_t b = batch.loss_weight;
  // TRL's ORPO trains the NLL on the whole chosen sequence, prompt included.
  const bool orpo = settings_.has_loss(DpoLoss::orpo);
  const BatchLogps policy = batch_logps(runner, models_.policy_name(), models_.policy(), batch, orpo ? b : 0, ld_alpha);
  const SequenceLogps& all = policy.labels;
  auto rows = [&](int64_t start) {
    return SequenceLogps{all.sum.narrow(0, start, b), all.tokens.narrow(0, start, b),
                         all.plain_sum.defined() ? all.plain_sum.narrow(0, start, b) : torch::Tensor()};
  };
  PreferenceLogps logps;
  logps.chosen = rows(0);
  logps.rejected = rows(b);
  if (reference.defined()) {
    reference = reference.to(all.sum.device(), torch::kFloat);
    logps.reference_chosen = reference.narrow(0, 0, b);
    logps.reference_rejected = reference.narrow(0, b, b);
  }
  if (orpo) logps.chosen_sequence = policy.every_token;
  const PreferenceLosses losses = preference_losses(settings_, logps);
  return {losses.losses.sum(), preference_metrics(losses, logps)};
}

void run_dpo(const Config& given) {
  if (given.dpo.online) return run_online_dpo(given);
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const ReferenceSource reference = resolve_reference(config);
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const Tokenizer tokenizer(tokenizer_path(config));
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  LoadedCausalLm loaded = load_causal_lm(config, dtype);  // on the host; the engine places it
  CausalLM& model = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);
  const fs::path reference_from = reference_folder(reference, config, config.dpo.reference_model, "dpo");

  PreferenceSplit data = load_preference_split(config, tokenizer, chat_template, "train-dpo", std::cout);
  std::cout << "train-dpo: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-dpo: " << data.eval.size() << " eval pairs; loss " << loss_names(config.dpo) << " (beta "
            << config.dpo.beta << "); reference: " << describe_reference(reference, reference_from)
            << "; model " << parameter_count(loaded.shape) << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "\n";
  prepare_lora(*model, config);

  PreferenceEngine held = make_preference_engine(config, loaded.shape, device, *model, reference, reference_from, dtype);
  offload::ParameterEngine* engine = held.engine.get();
  const std::string name = "policy", reference_name = "reference";
  CausalLMImpl* frozen = held.frozen ? held.frozen.get() : nullptr;

  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  if (reference == ReferenceSource::precomputed) {
    const std::string ld = config.dpo.ld_alpha < 1 ? "dpo.ld_alpha " + std::to_string(config.dpo.ld_alpha) : "";
    precompute_reference(config, config.dpo.reference_model, ld, *engine, name, *model, data.train, data.eval, pad_id,
                         config.dpo.ld_alpha);
  }

  PreferenceBatchSource source(std::move(data.train), std::move(data.eval),
                               PreferenceBatchSource::Options::from_config(config, pad_id));
  DpoObjective objective(config.dpo, reference, name, *model, reference_name, frozen);
  Trainer trainer(config, *engine, source, objective,
                  stage_trained_model(name, *model, loaded.shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-dpo", "pairs", {"rewards/accuracies", "rewards/margins"});
}

}  // namespace ferry
