// Axolotl's YAML (`axolotl train FILE`) as a Ferry config: base_model, adapter and lora_*,
// datasets, sequence_len, micro_batch_size, rl (dpo, ipo, orpo, simpo, kto, grpo) with its TRL
// keys under `trl:`. Defaults are Axolotl's schema's (utils/schemas); docs/from-trl.md's Axolotl
// section is the table.
#include <algorithm>
#include <cmath>

#include "core/config/config_import_shared.h"
#include "core/error.h"
#include "core/text.h"

namespace ferry::config_import {
namespace {

void map_model(ForeignConfigMapper& m) {
  const std::optional<std::string> base = m.text("base_model");
  if (base) set_model_path(m, "base_model", *base);
  if (auto v = m.text("base_model_config"); v && v != base) {
    m.unmapped("base_model_config", "Ferry reads config.json from model.path's folder");
  }
  for (const char* key : {"model_type", "tokenizer_type"}) {
    if (auto v = m.text(key); v && v->rfind("Auto", 0) != 0) {
      m.unmapped(key, "Ferry picks the model class from config.json's model_type (docs/models.md)");
    }
  }
  m.unmapped("tokenizer_config", "set tokenizer.path to the tokenizer.json or tokenizer.model file");
  m.unmapped("revision_of_model", "Ferry reads the folder in model.path: download that revision");
  m.unmapped_unless("trust_remote_code", "false", "Ferry runs no Python from the hub; it trains the families in "
                                                  "docs/models.md");
  m.consume("strict");

  const std::string adapter = m.text("adapter").value_or("");
  if (adapter == "lora" || adapter == "qlora") {
    const std::optional<int64_t> rank = m.integer("lora_r");
    if (!rank) throw ConfigError(m.where("adapter") + ": adapter: " + adapter + " needs lora_r (Axolotl refuses it too)");
    m.set("lora.rank", *rank);
    const std::optional<double> alpha = m.number("lora_alpha");
    m.set("lora.alpha", alpha.value_or(8.0), alpha ? "" : "no lora_alpha in the file: PEFT's default 8");
    if (auto v = m.number("lora_dropout")) m.set("lora.dropout", *v);
    std::vector<std::string> names;
    if (m.flag("lora_target_linear").value_or(false)) names.push_back("all-linear");
    if (auto v = m.names("lora_target_modules")) names.insert(names.end(), v->begin(), v->end());
    if (names.empty()) {
      set_peft_default_targets(m, "Axolotl");
    } else if (const auto targets = lora_targets(m, "lora_target_modules", names); !targets.empty()) {
      m.set("lora.target_modules", targets);
    }
    m.unmapped_unless("lora_fan_in_fan_out", "false", "Ferry's projections are Linear layers (no Conv1D)");
    m.unmapped("lora_model_dir", "Ferry starts new adapters; it does not load a trained one");
    m.unmapped_unless("peft_use_dora", "false", "Ferry's adapters are LoRA; DoRA has no equivalent");
    m.unmapped_unless("peft_use_rslora", "false", "Ferry scales LoRA by alpha / rank (for rsLoRA's scale set "
                                                  "lora.alpha to alpha x sqrt(rank))");
    m.unmapped("lora_modules_to_save", "Ferry trains only the adapters");
    m.unmapped("lora_target_parameters", "Ferry's LoRA adapts the projections in lora.target_modules");
  } else {
    if (!adapter.empty()) m.unmapped("adapter", "Ferry's adapters are LoRA (lora, qlora)");
    for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "lora_target_linear",
                            "lora_fan_in_fan_out", "lora_model_dir"}) {
      m.consume(key);  // Axolotl ignores them too without an adapter
    }
  }
  const bool four_bit = m.flag("load_in_4bit").value_or(false);
  const bool eight_bit = m.flag("load_in_8bit").value_or(false);
  if (four_bit) {
    m.set("lora.quantize_base", "nf4", "QLoRA: bitsandbytes' 4-bit NormalFloat with double quantization, as "
                                       "Axolotl's qlora");
  } else if (eight_bit) {
    m.set("lora.quantize_base", "int8", "bitsandbytes' row-wise int8 storage; Ferry keeps no fp16 outlier columns");
  }
}

// One dataset entry of `datasets:` / `test_datasets:` into `ferry_key`.
void map_dataset_entry(ForeignConfigMapper& m, Stage stage, const YAML::Node& entry, const std::string& label,
                       const std::string& ferry_key) {
  if (!entry.IsMap() || !entry["path"]) {
    throw ConfigError(m.where(label.substr(0, label.find('['))) + ": " + label + ": a dataset needs a `path`");
  }
  auto get = [&](const char* key) {
    return entry[key] && entry[key].IsScalar() ? entry[key].Scalar() : std::string();
  };
  if (entry["data_files"] && entry["data_files"].IsScalar()) {
    set_data_file(m, ferry_key, label, get("data_files"));
  } else {
    set_data_file(m, ferry_key, label, get("path"), get("name"), get("split"));
  }
  const std::string type = get("type");
  if (stage == Stage::sft) {
    if (type == "alpaca") {
      m.comment(ferry_key, "type alpaca: Ferry reads instruction/input/output rows itself");
    } else if (type == "chat_template" || type.rfind("sharegpt", 0) == 0) {
      m.comment(ferry_key, "type " + type + ": Ferry reads messages (and ShareGPT conversations) rows itself");
    } else if (type == "completion") {
      m.comment(ferry_key, "type completion: Ferry reads {\"text\": ...} rows (docs/data.md)");
    } else if (!type.empty()) {
      m.unmapped_part(label + ".type", "Axolotl's " + type + " prompt format: Ferry reads messages, Alpaca, "
                                       "ShareGPT and TRL rows (docs/data.md)");
    }
  } else if (!type.empty()) {
    m.unmapped_part(label + ".type", "Axolotl's " + type + " transform: Ferry reads TRL-style rows as they are "
                                     "(prompt/chosen/rejected, prompt/completion/label, prompts with gt_answer; "
                                     "docs/data.md)");
  }
  if (const std::string field = get("field_messages"); !field.empty() && field != "messages") {
    m.unmapped_part(label + ".field_messages", "Ferry reads a `messages` column: rename " + field +
                                                   ", or data.columns (docs/data.md)");
  }
  if (entry["roles_to_train"]) {
    const YAML::Node& roles = entry["roles_to_train"];
    if (!(roles.IsSequence() && roles.size() == 1 && roles[0].Scalar() == "assistant")) {
      m.unmapped_part(label + ".roles_to_train", "Ferry trains on the assistant turns only");
    }
  }
  if (const std::string eos = get("train_on_eos"); !eos.empty() && eos != "turn") {
    m.unmapped_part(label + ".train_on_eos", "Ferry trains on each assistant turn's end-of-turn marker (turn)");
  }
  static const std::vector<std::string> handled{"path",          "name",           "split",          "data_files",
                                                "type",          "field_messages", "roles_to_train", "train_on_eos",
                                                "ds_type"};
  for (const auto& kv : entry) {
    const std::string key = kv.first.Scalar();
    if (std::find(handled.begin(), handled.end(), key) == handled.end() && !kv.second.IsNull()) {
      m.unmapped_part(label + "." + key, "an Axolotl dataset option with no Ferry equivalent (docs/data.md)");
    }
  }
}

void map_data(ForeignConfigMapper& m, Stage stage) {
  const std::string file_key = stage == Stage::grpo ? "data.prompt_file" : "data.train_file";
  if (const YAML::Node* list = m.node("datasets"); list != nullptr && list->IsSequence() && list->size() > 0) {
    map_dataset_entry(m, stage, (*list)[0], "datasets[0]", file_key);
    for (size_t i = 1; i < list->size(); ++i) {
      m.unmapped_part("datasets[" + std::to_string(i) + "]", "Ferry reads one training file: merge this dataset "
                                                              "into " + file_key);
    }
  }
  if (const YAML::Node* list = m.node("test_datasets"); list != nullptr && list->IsSequence() && list->size() > 0) {
    map_dataset_entry(m, stage, (*list)[0], "test_datasets[0]", "data.eval_file");
    for (size_t i = 1; i < list->size(); ++i) {
      m.unmapped_part("test_datasets[" + std::to_string(i) + "]", "Ferry reads one eval file");
    }
  }
  if (auto v = m.number("val_set_size")) {
    if (*v > 0 && *v < 1) {
      m.set("data.eval_fraction", *v);
    } else if (*v >= 1) {
      m.unmapped("val_set_size", "a row count: Ferry holds out a fraction (data.eval_fraction)");
    }
  }
  m.consume("shuffle_merged_datasets");
  const std::optional<int64_t> length = m.integer("sequence_len");
  const std::string strategy = m.text("excess_length_strategy").value_or("drop");
  m.set("data.max_length", length.value_or(512),
        std::string(length ? "" : "Axolotl's default sequence_len; ") +
            "Axolotl drops a longer sample (excess_length_strategy drop); Ferry cuts a text or prompt/completion row "
            "at max_length and keeps a conversation's whole rounds (user turn + answer) that fit, dropping it only "
            "when its first round does not");
  if (strategy != "drop") {
    m.unmapped("excess_length_strategy", "Ferry keeps the rounds that fit (" + strategy + " has no equivalent)");
  }
  if (auto v = m.flag("sample_packing")) {
    m.set("data.packing", *v, *v ? "attention stays within each sample, as Axolotl's multipack" : "");
  }
  for (const char* key : {"pad_to_sequence_len", "eval_sample_packing", "sample_packing_group_size",
                          "sample_packing_bin_size"}) {
    m.consume(key);
  }
  m.unmapped_unless("train_on_inputs", "false", "Ferry never trains on the prompt (the assistant turns only)");
  m.unmapped("max_prompt_len", "Ferry skips an RL prompt of data.max_length tokens or more, and a preference pair "
                               "whose prompt fills it");
}

void map_training(ForeignConfigMapper& m, Stage stage) {
  const int64_t micro = m.integer("micro_batch_size").value_or(1);
  std::optional<int64_t> accumulation = m.integer("gradient_accumulation_steps");
  if (auto total = m.integer("batch_size"); total && !accumulation) {
    accumulation = std::max<int64_t>(1, *total / micro);
    m.set("train.grad_accumulation", *accumulation, "batch_size / micro_batch_size (one process)");
  }
  m.set("train.micro_batch_size", micro, m.has("micro_batch_size") ? "" : "Axolotl's default micro_batch_size");
  if (accumulation && m.has("gradient_accumulation_steps")) m.set("train.grad_accumulation", *accumulation);

  StepUnits units;
  if (stage == Stage::grpo) {
    units = map_trl_grpo(m, "trl.", micro, accumulation.value_or(1));
    m.note("Prompts: Ferry skips a prompt of data.max_length tokens or more; TRL keeps every prompt whole.");
  }
  const std::optional<int64_t> max_steps = m.integer("max_steps");
  if (max_steps && *max_steps > 0) set_steps(m, "train.max_steps", *max_steps, units, "max_steps");
  if (auto v = m.number("num_epochs")) set_epochs(m, stage, *v, "num_epochs", "");
  if (auto v = m.number("learning_rate")) m.set("train.learning_rate", *v);
  const std::optional<double> min_lr = m.number("cosine_min_lr_ratio");
  if (auto v = m.text("lr_scheduler")) {
    set_lr_scheduler(m, *v == "cosine" && min_lr ? "cosine_with_min_lr" : *v, min_lr, "lr_scheduler", "");
  } else if (min_lr) {
    m.set("train.min_lr_ratio", *min_lr);
  }
  m.unmapped("cosine_constant_lr_ratio", "Ferry's cosine decays to train.min_lr_ratio with no constant stretch");
  m.unmapped("lr_scheduler_kwargs", "Ferry's schedules take train.warmup_steps and train.min_lr_ratio only");
  const std::optional<int64_t> total = max_steps && *max_steps > 0 ? max_steps : std::nullopt;
  if (auto v = m.number("warmup_steps")) set_warmup(m, "warmup_steps", *v, false, total);
  if (auto v = m.number("warmup_ratio")) set_warmup(m, "warmup_ratio", *v, true, total);
  if (auto v = m.number("weight_decay")) m.set("train.weight_decay", *v);
  if (auto v = m.number("adam_beta1")) m.set("train.adam_beta1", *v);
  if (auto v = m.number("adam_beta2")) m.set("train.adam_beta2", *v);
  if (auto v = m.number("adam_epsilon")) m.set("train.adam_eps", *v);
  if (auto v = m.number("max_grad_norm")) m.set("train.max_grad_norm", *v);
  if (auto v = m.text("optimizer")) {
    static const std::vector<std::string> adamw{"adamw_torch", "adamw_torch_fused", "adamw_hf"};
    if (std::find(adamw.begin(), adamw.end(), *v) == adamw.end()) {
      m.unmapped("optimizer", v->find("8bit") != std::string::npos
                                  ? "Ferry's 8-bit Adam moments are offload.optimizer_state int8 (with offload.policy "
                                    "optimizer, params or auto)"
                                  : "Ferry's optimizer is AdamW (train.adam_*)");
    }
  }

  const std::string bf16 = m.text("bf16").value_or("auto");
  const bool fp16 = m.flag("fp16").value_or(false);
  if (fp16) {
    m.set("train.precision", "fp16", "fp16 with dynamic loss scaling");
  } else if (bf16 == "auto") {
    m.set("train.precision", "bf16", std::string(m.has("bf16") ? "" : "Axolotl's default bf16: auto; ") +
                                         "Axolotl uses bf16 where the GPU has it: set fp32 for an older GPU or the CPU");
  } else if (bf16 == "true" || bf16 == "True") {
    m.set("train.precision", "bf16", "Ferry computes in bf16 with fp32 master weights");
  }
  m.unmapped_unless("tf32", "false", "Ferry's fp32 matrix products use libtorch's default precision");
  for (const char* key : {"bfloat16", "float16"}) {
    m.unmapped(key, "weights held in half precision alone: Ferry keeps fp32 master weights (offload.master_weights "
                    "bf16_stochastic holds only bf16 ones)");
  }
  if (auto v = m.text("gradient_checkpointing")) {
    if (*v == "true" || *v == "True") {
      m.set("train.gradient_checkpointing", true);
    } else if (*v == "offload") {
      m.set("train.gradient_checkpointing", true);
      m.set("train.activation_offload", true, "gradient_checkpointing: offload");
    } else if (*v != "false" && *v != "False") {
      m.unmapped("gradient_checkpointing", "Ferry offloads checkpointed activations to host memory, not disk");
    }
  }
  m.unmapped("gradient_checkpointing_kwargs", "Ferry's checkpointing recomputes each decoder block; it takes no options");

  if (auto v = m.text("output_dir")) m.set("output.dir", *v);
  if (auto v = m.integer("seed")) m.set("train.seed", *v);
  if (auto v = m.number("save_steps")) {
    if (*v >= 1) set_steps(m, "train.save_every", static_cast<int64_t>(*v), units, "save_steps");
    else m.unmapped("save_steps", "a fraction of the run: Ferry saves every train.save_every steps");
  }
  m.unmapped("saves_per_epoch", "Ferry saves every train.save_every steps (steps per epoch / saves_per_epoch)");
  if (auto v = m.integer("save_total_limit")) m.set("output.keep_last", *v);
  if (auto v = m.number("eval_steps")) {
    if (stage == Stage::grpo) {
      m.unmapped("eval_steps", "Ferry's GRPO judges data.eval_file before the first rollout and after the last");
    } else if (*v >= 1) {
      m.set("train.eval_every", static_cast<int64_t>(*v));
    } else {
      m.unmapped("eval_steps", "a fraction of the run: Ferry evaluates every train.eval_every steps");
    }
  }
  m.unmapped("evals_per_epoch", "Ferry evaluates every train.eval_every steps (steps per epoch / evals_per_epoch)");
  if (auto v = m.integer("logging_steps")) set_steps(m, "logging.log_every", *v, units, "logging_steps");
  if (auto v = m.text("resume_from_checkpoint")) m.set("train.resume", *v);
  if (m.flag("auto_resume_from_checkpoints").value_or(false)) m.set("train.resume", "auto");
  m.unmapped_unless("use_tensorboard", "true", "Ferry writes TensorBoard files unless logging.tensorboard is false");
}

void map_preference(ForeignConfigMapper& m, Stage stage) {
  const std::string rl = m.text("rl").value_or("");
  const std::optional<double> beta = m.number("rl_beta");
  const std::optional<double> trl_beta = m.number("trl.beta");
  if (stage == Stage::kto) {
    if (beta || trl_beta) m.set("kto.beta", beta ? *beta : *trl_beta);
    if (auto v = m.number("kto_desirable_weight")) m.set("kto.desirable_weight", *v);
    if (auto v = m.number("kto_undesirable_weight")) m.set("kto.undesirable_weight", *v);
    return;
  }
  if (stage != Stage::dpo) return;
  if (rl == "ipo" || rl == "orpo" || rl == "simpo") m.set("dpo.loss_type", rl, "rl: " + rl);
  if (rl == "orpo") {
    if (auto v = m.number("orpo_alpha")) m.set("dpo.beta", *v, "orpo_alpha: ORPO's lambda, TRL's ORPOConfig beta");
  } else if (beta || trl_beta) {
    m.set("dpo.beta", beta ? *beta : *trl_beta);
  }
  if (auto v = m.number("simpo_gamma")) m.set("dpo.simpo_gamma", *v);
  if (auto v = m.number("cpo_alpha")) m.set("dpo.cpo_alpha", *v);
  if (auto v = m.number("dpo_label_smoothing")) m.set("dpo.label_smoothing", *v);
  m.unmapped_unless("dpo_use_weighting", "false", "Ferry's DPO has no WPO weighting");
  m.unmapped("rpo_alpha", "write it as dpo.loss_type [sigmoid, sft] with dpo.loss_weights [1, rpo_alpha]");
}

}  // namespace

Stage axolotl_stage(ForeignConfigMapper& m) {
  if (auto rl = m.peek("rl")) {
    if (*rl == "dpo" || *rl == "ipo" || *rl == "orpo" || *rl == "simpo") return Stage::dpo;
    if (*rl == "kto") return Stage::kto;
    if (*rl == "grpo") return Stage::grpo;
    throw ConfigError(m.where("rl") + ": rl: " + *rl + " has no Ferry stage (Ferry imports rl dpo, ipo, orpo, simpo, "
                      "kto and grpo)");
  }
  if (auto rm = m.peek("reward_model"); rm && (*rm == "true" || *rm == "True")) return Stage::rm;
  return Stage::any;
}

void map_axolotl(ForeignConfigMapper& m, Stage stage) {
  if (stage == Stage::ppo || stage == Stage::distill) {
    throw ConfigError(m.file() + ": Axolotl configs import as stage sft, dpo, kto, grpo or rm (got " +
                      std::string(enum_name(stage)) + ")");
  }
  m.consume("rl");
  m.consume("reward_model");
  m.note("Axolotl's defaults are written where Ferry's differ and change what is trained.");
  map_model(m);
  map_data(m, stage);
  map_training(m, stage);
  map_preference(m, stage);
  if (auto v = m.text("chat_template")) set_chat_template_name(m, "chat_template", *v);
  m.unmapped("chat_template_jinja", "save it as a .jinja file and set tokenizer.chat_template to its path");
  m.unmapped("default_system_message", "Ferry adds no system message: put it in the data");
  m.unmapped("eot_tokens", "Ferry's end-of-turn marker is the chat template's");
  for (const char* key : {"special_tokens", "tokens", "added_tokens_overrides"}) {
    m.unmapped(key, "Ferry does not change the tokenizer's vocabulary");
  }
}

std::string axolotl_reason(const std::string& key) {
  if (std::string common = common_reason(key); !common.empty()) return common;
  if (key.rfind("trl.", 0) == 0) return "a TRL option Ferry does not map";
  if (key.rfind("vllm", 0) == 0) return "Ferry samples with its own KV-cache decoder (generation.*)";
  const bool kernel_switch = key.size() > 7 && key.compare(key.size() - 7, 7, "_kernel") == 0;
  if (key.rfind("unsloth_", 0) == 0 || kernel_switch || key.rfind("flash_attn_", 0) == 0) {
    return "a kernel choice: Ferry runs its own fused kernels";
  }
  if (key == "plugins") return "Axolotl plugins run Python inside Axolotl";
  return "no Ferry equivalent (an Axolotl option Ferry does not map)";
}

}  // namespace ferry::config_import
