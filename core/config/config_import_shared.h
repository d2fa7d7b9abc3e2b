// Pieces of `ferry config import` that several tools share: transformers' TrainingArguments keys
// (TRL and LLaMA-Factory both take them), TRL's GRPO/DPO keys (Axolotl passes them on under
// `trl:`), dataset names, LoRA targets, chat template names, and the tool tables' entry points.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/config/foreign_config_mapper.h"

namespace ferry::config_import {

// --- the tool tables (config_import_trl.cpp, _axolotl.cpp, _llamafactory.cpp) ----------------
// The stage the file states (Stage::any when it does not); a stage Ferry lacks is a ConfigError.
Stage axolotl_stage(ForeignConfigMapper& m);
Stage llamafactory_stage(ForeignConfigMapper& m);
// Maps every key the tool's table knows for `stage`.
void map_trl(ForeignConfigMapper& m, Stage stage);
void map_axolotl(ForeignConfigMapper& m, Stage stage);
void map_llamafactory(ForeignConfigMapper& m, Stage stage);
// The reason listed for a key the table never read.
std::string trl_reason(const std::string& key);
std::string axolotl_reason(const std::string& key);
std::string llamafactory_reason(const std::string& key);

// --- shared pieces ----------------------------------------------------------------------------
// Reason for keys every tool has with no Ferry equivalent (loggers, hubs, launchers), or "".
std::string common_reason(const std::string& key);

// How a run's steps are counted. Ferry's RL stages count train.max_steps (and save_every,
// log_every) in rollouts; the other tools in optimizer steps.
struct StepUnits {
  double optimizer_steps_per_rollout = 0;  // 0: not an RL stage (steps are optimizer steps)
  std::string per_rollout;                 // how that number comes about, for comments
};

// transformers' TrainingArguments as TRL or LLaMA-Factory set them.
struct TrainerDefaults {
  std::string name;              // "TRL's SFTConfig": named in the comments
  double learning_rate = 5e-5;
  bool bf16 = false;             // TRL: true unless fp16 is set
  bool gradient_checkpointing = false;
  int64_t micro_batch_size = 8;  // per_device_train_batch_size
  double epochs = 3.0;
};

// output_dir, learning_rate, num_train_epochs, max_steps, per_device_train_batch_size,
// gradient_accumulation_steps, lr_scheduler_type (+ kwargs), warmup_steps/_ratio, weight decay,
// Adam, max_grad_norm, seed, bf16/fp16/tf32, gradient/activation checkpointing, optim, save/eval/
// logging cadence, report_to, resume_from_checkpoint, use_cpu, ddp_timeout.
void map_trainer_arguments(ForeignConfigMapper& m, Stage stage, const TrainerDefaults& d, const StepUnits& units);

// A run length in optimizer steps written as Ferry counts it for `stage` (rollouts for RL).
void set_steps(ForeignConfigMapper& m, const std::string& ferry_key, int64_t optimizer_steps, const StepUnits& units,
               const std::string& source_key);
// Epochs (passes over the data) into train.epochs, or the RL stage's num_episodes.
void set_epochs(ForeignConfigMapper& m, Stage stage, double epochs, const std::string& source_key,
                const std::string& comment);
// A scheduler name (transformers' SchedulerType) into train.lr_scheduler / min_lr_ratio.
void set_lr_scheduler(ForeignConfigMapper& m, const std::string& name, std::optional<double> min_lr_ratio,
                      const std::string& source_key, const std::string& comment);
// Warmup in optimizer steps, or a ratio of `total_steps` (needs them; else listed as unmapped).
void set_warmup(ForeignConfigMapper& m, const std::string& source_key, double value, bool is_ratio,
                std::optional<int64_t> total_steps);

// TRL's GRPOConfig keys, read as `prefix + key` ("" for TRL, "trl." for Axolotl). Returns how
// Ferry's rollouts relate to TRL's optimizer steps; `micro` and `accumulation` are the batch keys
// already read. Rewards: reward_funcs / reward_model_name_or_path / reward_weights.
StepUnits map_trl_grpo(ForeignConfigMapper& m, const std::string& prefix, int64_t micro, int64_t accumulation);

// A dataset as a Ferry data path: a local file stays as written; a hub name ORG/NAME becomes
// hf:ORG/NAME[/SUBSET][:SPLIT] (the local hub cache); nullopt for a name Ferry cannot read.
std::optional<std::string> data_path(const std::string& name, const std::string& subset, const std::string& split);
// Writes `ferry_key` from a dataset name (with the hub-cache comment), or lists `source_key`.
void set_data_file(ForeignConfigMapper& m, const std::string& ferry_key, const std::string& source_key,
                   const std::string& name, const std::string& subset = "", const std::string& split = "");
// model.path from a model name or folder (a hub name gets a comment).
void set_model_path(ForeignConfigMapper& m, const std::string& source_key, const std::string& name);

// LoRA target names as Ferry's lora.target_modules ("all-linear"/"all": every projection); names
// Ferry's blocks do not have are listed under `source_key`. Empty when none is left.
std::vector<std::string> lora_targets(ForeignConfigMapper& m, const std::string& source_key,
                                      const std::vector<std::string>& names);
// PEFT's own target list when none is given (Llama, Mistral, Qwen, Gemma: q_proj, v_proj).
void set_peft_default_targets(ForeignConfigMapper& m, const std::string& tool);

// A chat template name of the other tool as tokenizer.chat_template (Ferry's shipped template of
// that name, or auto with the key listed).
void set_chat_template_name(ForeignConfigMapper& m, const std::string& source_key, const std::string& name);

// train.precision from bf16 / fp16 switches (`bf16` unset: `bf16_default`).
void set_precision(ForeignConfigMapper& m, std::optional<bool> bf16, std::optional<bool> fp16, bool bf16_default,
                   const std::string& default_name);

}  // namespace ferry::config_import
