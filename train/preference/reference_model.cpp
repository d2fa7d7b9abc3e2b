// The preference stages' reference model (see reference_model.h).
#include "train/preference/reference_model.h"

#include <filesystem>
#include <iostream>
#include <optional>

#include "core/error.h"
#include "kernels/ops/chunked_lm_head.h"
#include "offload/engine.h"
#include "src/data/token_batch.h"
#include "src/io/hf_checkpoint.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "train/backbone_runner.h"
#include "train/preference/reference_logps_cache.h"
#include "train/run_engine.h"

namespace fs = std::filesystem;

namespace ferry {

ReferenceSource resolve_reference_source(DpoReference mode, const std::string& reference_model, bool needs_reference,
                                         bool lora, const std::string& section) {
  if (!needs_reference) return ReferenceSource::none;
  switch (mode) {
    case DpoReference::auto_:
      if (!lora) return ReferenceSource::precomputed;
      return reference_model.empty() ? ReferenceSource::lora_off : ReferenceSource::model;
    case DpoReference::precompute:
      if (lora && !reference_model.empty()) {
        throw ConfigError(section + ".reference precompute with LoRA takes the policy's base weights as the "
                          "reference; for another reference folder (" + section + ".reference_model) use " + section +
                          ".reference model");
      }
      return ReferenceSource::precomputed;
    case DpoReference::model:
      return ReferenceSource::model;
    case DpoReference::lora_off:
      if (!lora) {
        throw ConfigError(section + ".reference lora_off: without LoRA (lora.rank 0) the policy is no reference; use " +
                          section + ".reference precompute or model, or set lora.rank");
      }
      if (!reference_model.empty()) {
        throw ConfigError(section + ".reference_model is set, but " + section + ".reference lora_off takes the "
                          "policy's base weights as the reference; use " + section + ".reference model or "
                          "precompute, or clear " + section + ".reference_model");
      }
      return ReferenceSource::lora_off;
  }
  throw InternalError("unhandled " + section + ".reference");
}

fs::path reference_folder(ReferenceSource source, const Config& config, const std::string& reference_model,
                          const std::string& section) {
  if (source != ReferenceSource::model) return {};
  const fs::path folder = reference_model.empty() ? fs::path(config.model.path) : fs::path(reference_model);
  if (folder.empty()) {
    throw ConfigError(section + ".reference_model: a model started from model.config has no folder to load the "
                      "reference from; set " + section + ".reference_model, or use " + section + ".reference precompute");
  }
  return folder;
}

CausalLM load_frozen_reference(const fs::path& folder, offload::ParameterEngine& engine, const std::string& name,
                                       at::ScalarType dtype, c10::Device device) {
  CausalLM frozen = causal_lm_from_pretrained(folder, dtype, c10::kCPU);
  for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  engine.add_model(name, offload::group_parameters(*frozen, false), /*trainable=*/false);
  frozen->to(device);  // the buffers; the parameters are where the engine put them
  return frozen;
}

PreferenceEngine make_preference_engine(Config& config, const ModelShape& shape, c10::Device device,
                                        CausalLMImpl& policy, ReferenceSource source, const fs::path& folder,
                                        at::ScalarType dtype) {
  PreferenceEngine out;
  out.engine = make_run_engine(config, shape, device, std::cout);
  out.engine->add_model("policy", offload::group_parameters(policy, /*trainable_only=*/false), /*trainable=*/true);
  policy.to(device);  // the buffers; the parameters are where the engine put them
  if (source == ReferenceSource::model) out.frozen = load_frozen_reference(folder, *out.engine, "reference", dtype, device);
  return out;
}

std::string describe_reference(ReferenceSource source, const fs::path& folder) {
  switch (source) {
    case ReferenceSource::none: return "none (reference-free loss)";
    case ReferenceSource::lora_off: return "the policy with its LoRA adapters off";
    case ReferenceSource::model: return "a frozen model from " + folder.string();
    case ReferenceSource::precomputed: return "log-probs precomputed before training";
  }
  return "?";
}

BatchLogps batch_logps(BackboneRunner& runner, const std::string& name, CausalLMImpl& model,
                       const MicroBatch& batch, int64_t every_token_rows, double ld_alpha) {
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
      [=](const torch::Tensor& hidden, const torch::Tensor& weight, double softcap) {
        const torch::Tensor h = hidden.reshape({-1, hidden.size(-1)});
        const torch::Tensor lp = kernels::lm_head_tokens(h, weight, flat, 1.0, chunk, false, softcap).logprobs;
        if (!flat_every.defined()) return lp;
        const torch::Tensor chosen = h.narrow(0, 0, flat_every.size(0));
        return torch::cat({lp, kernels::lm_head_tokens(chosen, weight, flat_every, 1.0, chunk, false, softcap).logprobs});
      });
  BatchLogps out;
  const torch::Tensor token_logps = all.narrow(0, 0, flat.size(0)).view(targets.sizes());
  out.labels = sequence_logps(token_logps, targets);
  if (ld_alpha < 1.0) {
    out.labels.plain_sum = out.labels.sum;
    out.labels.sum = length_desensitised_sums(token_logps, targets.to(token_logps.device()), ld_alpha);
  }
  if (every_token.defined()) {
    out.every_token = sequence_logps(all.narrow(0, flat.size(0), flat_every.size(0)).view(every_token.sizes()),
                                     every_token);
  }
  return out;
}

torch::Tensor reference_logps(const MicroBatch& batch, const std::string& model_name, CausalLMImpl& model,
                              bool adapters_off, BackboneRunner& runner, double ld_alpha) {
  torch::NoGradGuard no_grad;
  std::optional<LoraDisabled> base_only;
  if (adapters_off) base_only.emplace(*model.model);
  return batch_logps(runner, model_name, model, batch, 0, ld_alpha).labels.sum;  // (2B)
}

PolicyAndReference::PolicyAndReference(ReferenceSource source, std::string policy_name, CausalLMImpl& policy,
                                       std::string reference_name, CausalLMImpl* reference)
    : source_(source),
      policy_name_(std::move(policy_name)),
      reference_name_(std::move(reference_name)),
      policy_(policy),
      reference_(reference) {
  FERRY_CHECK(source != ReferenceSource::model || reference != nullptr, "reference model missing");
}

torch::Tensor PolicyAndReference::reference_logps(const MicroBatch& rows, BackboneRunner& runner, double ld_alpha) const {
  switch (source_) {
    case ReferenceSource::none: return {};
    case ReferenceSource::precomputed: return rows.at("reference_logps");
    case ReferenceSource::model: return ferry::reference_logps(rows, reference_name_, *reference_, false, runner, ld_alpha);
    case ReferenceSource::lora_off: return ferry::reference_logps(rows, policy_name_, policy_, true, runner, ld_alpha);
  }
  throw InternalError("unhandled reference source");
}

void precompute_reference(const Config& config, const std::string& reference_model, const std::string& identity_extra,
                          offload::ParameterEngine& engine, const std::string& name, CausalLMImpl& model,
                          std::vector<PreferencePair>& train, std::vector<PreferencePair>& eval, int64_t pad_id,
                          double ld_alpha, const std::string& unit) {
  const std::string& other = reference_model;
  auto load_into_policy = [&](const fs::path& folder) {
    engine.with_weights(name, offload::ParameterEngine::WeightAccess::write, [&] {
      LoadStateOptions options;
      options.source = folder.string();
      load_state(model, io::load_hf_weights(folder), options);
    });
  };
  // What the cached values depend on besides the rows.
  std::string identity =
      !other.empty()              ? model_folder_identity(other)
      : !config.model.path.empty() ? model_folder_identity(config.model.path)
                                   : "model.config " + config.model.config + ", train.seed " + std::to_string(config.train.seed);
  if (!identity_extra.empty()) identity += "\n" + identity_extra;
  BackboneRunner runner(engine, /*activation_checkpointing=*/false, config.train.logits_chunk);
  bool swapped = false;
  model.eval();
  fill_reference_logps(
      train, eval, fs::path(config.output.dir) / "reference_logps.safetensors", identity,
      config.train.micro_batch_size, pad_id,
      [&](const MicroBatch& batch) {
        if (!other.empty() && !swapped) {  // only when the cache cannot serve
          load_into_policy(other);
          swapped = true;
        }
        return reference_logps(batch, name, model, /*adapters_off=*/true, runner, ld_alpha);
      },
      std::cout, unit);
  if (swapped) load_into_policy(config.model.path);
  model.train();
}

}  // namespace ferry
