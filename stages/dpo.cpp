// `ferry train-dpo`: preference pairs and the DPO-family losses plugged into the shared loop.
#include "stages/dpo.h"

#include <iostream>
#include <optional>

#include "core/error.h"
#include "src/data/token_batch.h"
#include "src/io/hf_checkpoint.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/model_setup.h"
#include "train/preference/preference_batches.h"
#include "train/preference/preference_losses.h"
#include "train/preference/reference_logps_cache.h"
#include "train/run_engine.h"
#include "train/run_to_the_end.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace ferry {

ReferenceSource resolve_reference(const Config& config) {
  if (!uses_reference(config.dpo.loss_type)) return ReferenceSource::none;
  const bool lora = config.lora.rank > 0;
  switch (config.dpo.reference) {
    case DpoReference::auto_:
      if (!lora) return ReferenceSource::precomputed;
      return config.dpo.reference_model.empty() ? ReferenceSource::lora_off : ReferenceSource::model;
    case DpoReference::precompute:
      if (lora && !config.dpo.reference_model.empty()) {
        throw ConfigError("dpo.reference precompute with LoRA takes the policy's base weights as the reference; "
                          "for another reference folder (dpo.reference_model) use dpo.reference model");
      }
      return ReferenceSource::precomputed;
    case DpoReference::model:
      return ReferenceSource::model;
    case DpoReference::lora_off:
      if (!lora) {
        throw ConfigError("dpo.reference lora_off: without LoRA (lora.rank 0) the policy is no reference; use "
                          "dpo.reference precompute or model, or set lora.rank");
      }
      if (!config.dpo.reference_model.empty()) {
        throw ConfigError("dpo.reference_model is set, but dpo.reference lora_off takes the policy's base weights as "
                          "the reference; use dpo.reference model or precompute, or clear dpo.reference_model");
      }
      return ReferenceSource::lora_off;
  }
  throw InternalError("unhandled dpo.reference");
}

// The label log-probs of every row of the batch (2B); with every_token_rows b > 0 also, from the
// same forward, those of the first b rows (the chosen answers) over every real token, prompt
// included (ORPO's NLL).
struct BatchLogps {
  SequenceLogps labels, every_token;
};
BatchLogps batch_logps(BackboneRunner& runner, const std::string& name, LlamaForCausalLMImpl& model,
                       const MicroBatch& batch, int64_t every_token_rows) {
  const int64_t columns = batch.at("labels").size(1) - 1;
  const torch::Tensor targets = batch.at("labels").narrow(1, 1, columns);  // (2B, T-1)
  torch::Tensor every_token;                                               // (b, T-1)
  if (every_token_rows > 0) {
    const torch::Tensor ids = batch.at("input_ids").narrow(0, 0, every_token_rows);
    every_token = ids.masked_fill(batch.at("attention_mask").narrow(0, 0, every_token_rows).eq(0), kIgnoreLabel)
                      .narrow(1, 1, columns);
  }
  const c10::Device device = model.head_weight().device();
  const torch::Tensor flat = targets.reshape({-1}).to(device);
  const torch::Tensor flat_every = every_token.defined() ? every_token.reshape({-1}).to(device) : torch::Tensor();
  const int64_t chunk = runner.logits_chunk();
  const torch::Tensor all = runner.causal_lm_head(
      name, model, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"), 0, columns,
      [=](const torch::Tensor& hidden, const torch::Tensor& weight) {
        const torch::Tensor h = hidden.reshape({-1, hidden.size(-1)});
        const torch::Tensor lp = kernels::lm_head_tokens(h, weight, flat, 1.0, chunk, false).logprobs;
        if (!flat_every.defined()) return lp;
        const torch::Tensor chosen = h.narrow(0, 0, flat_every.size(0));
        return torch::cat({lp, kernels::lm_head_tokens(chosen, weight, flat_every, 1.0, chunk, false).logprobs});
      });
  BatchLogps out;
  out.labels = sequence_logps(all.narrow(0, 0, flat.size(0)).view(targets.sizes()), targets);
  if (every_token.defined()) {
    out.every_token = sequence_logps(all.narrow(0, flat.size(0), flat_every.size(0)).view(every_token.sizes()),
                                     every_token);
  }
  return out;
}

torch::Tensor reference_logps(const MicroBatch& batch, const std::string& model_name, LlamaForCausalLMImpl& model,
                              bool adapters_off, BackboneRunner& runner) {
  torch::NoGradGuard no_grad;
  std::optional<LoraDisabled> base_only;
  if (adapters_off) base_only.emplace(*model.model);
  return batch_logps(runner, model_name, model, batch, 0).labels.sum;  // (2B)
}

DpoObjective::DpoObjective(const DpoConfig& settings, ReferenceSource source, std::string policy_name,
                           LlamaForCausalLMImpl& policy, std::string reference_name, LlamaForCausalLMImpl* reference)
    : settings_(settings),
      source_(source),
      policy_name_(std::move(policy_name)),
      reference_name_(std::move(reference_name)),
      policy_(policy),
      reference_(reference) {
  FERRY_CHECK(source != ReferenceSource::model || reference != nullptr, "dpo: reference model missing");
}

LossSum DpoObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  // The reference first, so that no autograd graph is alive while it runs.
  torch::Tensor reference;  // (2B)
  if (source_ == ReferenceSource::precomputed) reference = batch.at("reference_logps");
  if (source_ == ReferenceSource::model) reference = reference_logps(batch, reference_name_, *reference_, false, runner);
  if (source_ == ReferenceSource::lora_off) reference = reference_logps(batch, policy_name_, policy_, true, runner);
  const int64_t b = batch.loss_weight;
  // TRL's ORPO trains the NLL on the whole chosen sequence, prompt included.
  const BatchLogps policy = batch_logps(runner, policy_name_, policy_, batch, settings_.loss_type == DpoLoss::orpo ? b : 0);
  const SequenceLogps& all = policy.labels;
  PreferenceLogps logps;
  logps.chosen = {all.sum.narrow(0, 0, b), all.tokens.narrow(0, 0, b)};
  logps.rejected = {all.sum.narrow(0, b, b), all.tokens.narrow(0, b, b)};
  if (reference.defined()) {
    reference = reference.to(all.sum.device(), torch::kFloat);
    logps.reference_chosen = reference.narrow(0, 0, b);
    logps.reference_rejected = reference.narrow(0, b, b);
  }
  if (settings_.loss_type == DpoLoss::orpo) logps.chosen_sequence = policy.every_token;
  const PreferenceLosses losses = preference_losses(settings_, logps);
  return {losses.losses.sum(), preference_metrics(losses, logps)};
}

namespace {

// dpo.reference precompute: every pair's reference log-probs, from the cache or computed now —
// before the trainer resumes anything, while the live policy still holds model.path's weights. A
// separate dpo.reference_model is loaded into the policy for the computation, and model.path's
// weights are put back after.
void precompute_reference(const Config& config, offload::ParameterEngine& engine, const std::string& name,
                          LlamaForCausalLMImpl& model, PreferenceSplit& data, int64_t pad_id) {
  const std::string& other = config.dpo.reference_model;
  auto load_into_policy = [&](const fs::path& folder) {
    engine.with_weights(name, offload::ParameterEngine::WeightAccess::write, [&] {
      LoadStateOptions options;
      options.source = folder.string();
      load_state(model, io::load_hf_weights(folder), options);
    });
  };
  // What the cached values depend on besides the pairs.
  const std::string identity =
      !other.empty()              ? model_folder_identity(other)
      : !config.model.path.empty() ? model_folder_identity(config.model.path)
                                   : "model.config " + config.model.config + ", train.seed " + std::to_string(config.train.seed);
  BackboneRunner runner(engine, /*activation_checkpointing=*/false, config.train.logits_chunk);
  bool swapped = false;
  model.eval();
  fill_reference_logps(
      data.train, data.eval, fs::path(config.output.dir) / "reference_logps.safetensors", identity,
      config.train.micro_batch_size, pad_id,
      [&](const MicroBatch& batch) {
        if (!other.empty() && !swapped) {  // only when the cache cannot serve
          load_into_policy(other);
          swapped = true;
        }
        return reference_logps(batch, name, model, /*adapters_off=*/true, runner);
      },
      std::cout);
  if (swapped) load_into_policy(config.model.path);
  model.train();
}

}  // namespace

void run_dpo(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const ReferenceSource reference = resolve_reference(config);
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const Tokenizer tokenizer(tokenizer_path(config));
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  LoadedCausalLm loaded = load_causal_lm(config, dtype);  // on the host; the engine places it
  LlamaForCausalLM& model = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);
  const fs::path reference_folder = config.dpo.reference_model.empty() ? fs::path(config.model.path)
                                                                        : fs::path(config.dpo.reference_model);
  if (reference == ReferenceSource::model && reference_folder.empty()) {
    throw ConfigError("dpo.reference_model: a model started from model.config has no folder to load the reference "
                      "from; set dpo.reference_model, or use dpo.reference precompute");
  }

  PreferenceSplit data = load_preference_split(config, tokenizer, chat_template, "train-dpo", std::cout);
  std::cout << "train-dpo: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-dpo: " << data.eval.size() << " eval pairs; loss " << enum_name(config.dpo.loss_type)
            << " (beta " << config.dpo.beta << "); reference: "
            << (reference == ReferenceSource::none         ? "none (reference-free loss)"
                : reference == ReferenceSource::lora_off   ? "the policy with its LoRA adapters off"
                : reference == ReferenceSource::model      ? "a frozen model from " + reference_folder.string()
                                                           : "log-probs precomputed before training")
            << "; model " << loaded.shape.num_parameters() << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "\n";
  prepare_lora(*model, config);

  auto engine = make_run_engine(config, loaded.shape, device, std::cout);
  const std::string name = "policy", reference_name = "reference";
  engine->add_model(name, offload::group_parameters(*model, /*trainable_only=*/false), /*trainable=*/true);
  model->to(device);  // the buffers; the parameters are where the engine put them
  LlamaForCausalLM frozen{nullptr};
  if (reference == ReferenceSource::model) {
    frozen = causal_lm_from_pretrained(reference_folder, dtype, c10::kCPU);
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
    engine->add_model(reference_name, offload::group_parameters(*frozen, false), /*trainable=*/false);
    frozen->to(device);
  }

  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  if (reference == ReferenceSource::precomputed) precompute_reference(config, *engine, name, *model, data, pad_id);

  PreferenceBatchSource source(std::move(data.train), std::move(data.eval),
                               PreferenceBatchSource::Options::from_config(config, pad_id));
  DpoObjective objective(config.dpo, reference, name, *model, reference_name, frozen ? frozen.get() : nullptr);
  Trainer trainer(config, *engine, source, objective,
                  stage_trained_model(name, *model, loaded.shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-dpo", "pairs", {"rewards/accuracies", "rewards/margins"});
}

}  // namespace ferry
