// Mappings several tools share (see config_import_shared.h): transformers' TrainingArguments,
// TRL's GRPO keys, dataset names, LoRA targets, chat template names, precision.
#include "core/config/config_import_shared.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/text.h"

namespace ferry::config_import {
namespace {

constexpr double kFerryLearningRate = 2e-5;  // TrainConfig's default

const std::vector<std::string> kFerryLoraTargets{"q_proj",    "k_proj",  "v_proj",       "qkv_proj", "o_proj",
                                                 "gate_proj", "up_proj", "gate_up_proj", "down_proj"};
const std::vector<std::string> kAllLinear{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool looks_local(const std::string& name) {
  for (const char* prefix : {"/", "./", "../", "~/"}) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  for (const char* ext : {".jsonl", ".json", ".parquet", ".arrow", ".csv", ".jinja", ".gguf"}) {
    if (ends_with(name, ext)) return true;
  }
  std::error_code ec;
  return std::filesystem::exists(name, ec);
}

bool looks_like_hub_id(const std::string& name) {
  const size_t slash = name.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
         name.find('/', slash + 1) == std::string::npos && name.find_first_of(" \t:") == std::string::npos;
}

int64_t ceil_div(double a, double b) { return static_cast<int64_t>(std::ceil(a / b - 1e-9)); }

}  // namespace

std::string common_reason(const std::string& key) {
  for (const char* prefix : {"wandb_", "mlflow_", "comet_", "swanlab_", "hub_", "push_to_hub", "trackio"}) {
    if (key.rfind(prefix, 0) == 0) {
      return "an experiment tracker or the Hub: Ferry writes TensorBoard event files and metrics.jsonl into "
             "output.dir and uploads nothing";
    }
  }
  for (const char* k : {"deepspeed", "fsdp", "fsdp_config", "fsdp_version", "accelerator_config", "ddp_backend",
                        "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "local_rank", "world_size"}) {
    if (key == k) {
      return "a launcher/sharding setting: Ferry shards with distributed.zero_stage and offloads with offload.policy "
             "(docs/offload.md), started by `ferry launch`";
    }
  }
  for (const char* k : {"attn_implementation", "flash_attn", "flash_attention", "sdp_attention", "xformers_attention",
                        "flex_attention", "s2_attention", "torch_compile", "use_liger_kernel", "enable_liger_kernel",
                        "use_unsloth", "use_unsloth_gc", "liger_kernel"}) {
    if (key == k) return "a kernel choice: Ferry runs its own attention (SDPA) and fused kernels";
  }
  for (const char* k : {"dataset_num_proc", "preprocessing_num_workers", "preprocessing_batch_size", "overwrite_cache",
                        "dataloader_num_workers", "dataloader_pin_memory", "dataloader_prefetch_factor",
                        "dataset_processes", "dataset_prepared_path", "tokenized_path", "dataloader_persistent_workers"}) {
    if (key == k) return "data preprocessing workers/caches: Ferry tokenizes as it reads data.train_file";
  }
  for (const char* k : {"logging_first_step", "logging_dir", "run_name", "plot_loss", "include_tokens_per_second",
                        "include_num_input_tokens_seen", "disable_tqdm", "log_level", "overwrite_output_dir"}) {
    if (key == k) return "a logging/output detail with no Ferry equivalent (Ferry logs to output.dir, see logging.*)";
  }
  return "";
}

void set_steps(ForeignConfigMapper& m, const std::string& ferry_key, int64_t optimizer_steps, const StepUnits& units,
               const std::string& source_key) {
  if (units.optimizer_steps_per_rollout <= 0) {
    m.set(ferry_key, optimizer_steps);
    return;
  }
  const double per = units.optimizer_steps_per_rollout;
  const int64_t rollouts = std::max<int64_t>(1, ceil_div(static_cast<double>(optimizer_steps), per));
  const bool exact = std::fabs(static_cast<double>(rollouts) * per - static_cast<double>(optimizer_steps)) < 1e-9;
  m.set(ferry_key, rollouts,
        m.tool() + "'s " + source_key + " " + std::to_string(optimizer_steps) + " counts optimizer steps; Ferry counts " +
            "rollouts here, each " + units.per_rollout + " = " + number_text(per) + " optimizer steps: " +
            std::to_string(optimizer_steps) + " / " + number_text(per) + (exact ? " = " : ", rounded up: ") +
            std::to_string(rollouts));
}

void set_epochs(ForeignConfigMapper& m, Stage stage, double epochs, const std::string& source_key,
                const std::string& comment) {
  const std::string key = stage == Stage::grpo ? "grpo.num_episodes" : stage == Stage::ppo ? "ppo.num_episodes"
                                                                                          : "train.epochs";
  if (epochs != std::floor(epochs) || epochs < 1) {
    m.unmapped(source_key, "Ferry runs whole passes over the data (" + key + "): set it, or train.max_steps");
    return;
  }
  std::string why = comment;
  if (key != "train.epochs") {
    why += std::string(why.empty() ? "" : "; ") + "passes over the prompts";
  }
  m.set(key, static_cast<int64_t>(epochs), why);
}

void set_lr_scheduler(ForeignConfigMapper& m, const std::string& name, std::optional<double> min_lr_ratio,
                      const std::string& source_key, const std::string& comment) {
  if (name == "linear" || name == "cosine") {
    m.set("train.lr_scheduler", name, comment);
  } else if (name == "constant" || name == "constant_with_warmup") {
    m.set("train.lr_scheduler", "constant",
          comment + (comment.empty() ? "" : "; ") + "Ferry's constant schedule follows train.warmup_steps when set");
  } else if (name == "cosine_with_min_lr") {
    m.set("train.lr_scheduler", "cosine", comment);
    if (!min_lr_ratio) m.unmapped(source_key, "cosine_with_min_lr without min_lr_rate: set train.min_lr_ratio");
  } else {
    m.unmapped(source_key, "Ferry's schedules are cosine, linear and constant (after a linear warmup); " + name +
                               " is not one of them");
    return;
  }
  if (min_lr_ratio) m.set("train.min_lr_ratio", *min_lr_ratio, "the floor of the decay as a fraction of the peak");
}

void set_warmup(ForeignConfigMapper& m, const std::string& source_key, double value, bool is_ratio,
                std::optional<int64_t> total_steps) {
  if (!is_ratio) {
    m.set("train.warmup_steps", static_cast<int64_t>(value));
    return;
  }
  if (value <= 0) return;
  if (!total_steps) {
    m.unmapped(source_key, "a warmup ratio (" + number_text(value) + ") needs the run's length in optimizer steps, "
                           "which this file does not give (no max_steps): set train.warmup_steps");
    return;
  }
  const int64_t steps = static_cast<int64_t>(std::ceil(value * static_cast<double>(*total_steps)));
  m.set("train.warmup_steps", steps,
        source_key + " " + number_text(value) + " of " + std::to_string(*total_steps) +
            " optimizer steps, rounded up as transformers does; Ferry's warmup counts optimizer steps");
}

void set_precision(ForeignConfigMapper& m, std::optional<bool> bf16, std::optional<bool> fp16, bool bf16_default,
                   const std::string& default_name) {
  if (fp16.value_or(false)) {
    m.set("train.precision", "fp16", "fp16 with dynamic loss scaling, as fp16: true");
  } else if (bf16.value_or(bf16_default)) {
    m.set("train.precision", "bf16",
          std::string(bf16 ? "" : default_name + " default (bf16: true unless fp16 is set); ") +
              "Ferry computes in bf16 with fp32 master weights");
  }
}

void map_trainer_arguments(ForeignConfigMapper& m, Stage stage, const TrainerDefaults& d, const StepUnits& units) {
  const bool rl = units.optimizer_steps_per_rollout > 0;
  if (auto v = m.text("output_dir")) m.set("output.dir", *v);

  if (auto v = m.number("learning_rate")) {
    m.set("train.learning_rate", *v);
  } else if (d.learning_rate != kFerryLearningRate) {
    m.set("train.learning_rate", d.learning_rate, d.name + " default");
  }
  if (auto v = m.integer("per_device_train_batch_size")) {
    m.set("train.micro_batch_size", *v, rl ? "completions per micro-batch, as per_device_train_batch_size" : "");
  } else {
    m.set("train.micro_batch_size", d.micro_batch_size, d.name + " default per_device_train_batch_size");
  }
  if (auto v = m.integer("gradient_accumulation_steps")) m.set("train.grad_accumulation", *v);
  m.unmapped_unless("auto_find_batch_size", "false", "Ferry does not retry smaller batches on out-of-memory; "
                                                     "offload.policy auto picks a micro-batch that fits");
  m.unmapped("per_device_eval_batch_size", "Ferry evaluates in micro-batches of train.micro_batch_size (the same "
                                           "numbers)");

  const std::optional<int64_t> max_steps = m.integer("max_steps");
  if (max_steps && *max_steps > 0) set_steps(m, "train.max_steps", *max_steps, units, "max_steps");
  if (auto v = m.number("num_train_epochs")) {
    set_epochs(m, stage, *v, "num_train_epochs", "");
  } else if (!max_steps || *max_steps <= 0) {
    set_epochs(m, stage, d.epochs, "num_train_epochs", d.name + " default num_train_epochs");
  }

  std::optional<double> min_lr_ratio;
  if (const YAML::Node* kwargs = m.node("lr_scheduler_kwargs")) {
    if (kwargs->IsMap() && kwargs->size() == 1 && ((*kwargs)["min_lr_rate"] || (*kwargs)["min_lr"])) {
      double rate = 0;
      if ((*kwargs)["min_lr_rate"] && YAML::convert<double>::decode((*kwargs)["min_lr_rate"], rate)) {
        min_lr_ratio = rate;
      } else {
        m.unmapped("lr_scheduler_kwargs", "min_lr is absolute; Ferry's floor is train.min_lr_ratio (a fraction of "
                                          "the peak)");
      }
    } else {
      m.unmapped("lr_scheduler_kwargs", "only min_lr_rate (as train.min_lr_ratio) has a Ferry equivalent");
    }
  }
  if (auto v = m.text("lr_scheduler_type")) {
    set_lr_scheduler(m, *v, min_lr_ratio, "lr_scheduler_type", "");
  } else {
    set_lr_scheduler(m, "linear", min_lr_ratio, "lr_scheduler_type", d.name + " default lr_scheduler_type");
  }
  const std::optional<int64_t> total = max_steps && *max_steps > 0 ? max_steps : std::nullopt;
  if (auto v = m.number("warmup_steps")) {
    set_warmup(m, "warmup_steps", *v, *v > 0 && *v < 1, total);  // transformers 5: below 1 is a ratio
  }
  if (auto v = m.number("warmup_ratio")) set_warmup(m, "warmup_ratio", *v, true, total);

  if (auto v = m.number("weight_decay")) m.set("train.weight_decay", *v);
  if (auto v = m.number("adam_beta1")) m.set("train.adam_beta1", *v);
  if (auto v = m.number("adam_beta2")) m.set("train.adam_beta2", *v);
  if (auto v = m.number("adam_epsilon")) m.set("train.adam_eps", *v);
  if (auto v = m.number("max_grad_norm")) m.set("train.max_grad_norm", *v);
  if (auto v = m.integer("seed")) m.set("train.seed", *v);
  m.unmapped("data_seed", "Ferry shuffles with train.seed");
  if (auto v = m.text("optim")) {
    static const std::vector<std::string> adamw{"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_apex_fused"};
    if (std::find(adamw.begin(), adamw.end(), *v) == adamw.end()) {
      m.unmapped("optim", v->find("8bit") != std::string::npos
                              ? "Ferry's 8-bit Adam moments are offload.optimizer_state int8 (with offload.policy "
                                "optimizer, params or auto)"
                              : "Ferry's optimizer is AdamW (train.adam_*)");
    }
  }

  set_precision(m, m.flag("bf16"), m.flag("fp16"), d.bf16, d.name);
  m.unmapped_unless("tf32", "false", "Ferry's fp32 matrix products use libtorch's default precision");
  std::optional<bool> checkpointing = m.flag("activation_checkpointing");
  if (const std::optional<bool> gc = m.flag("gradient_checkpointing"); gc && !checkpointing) checkpointing = gc;
  if (checkpointing.value_or(d.gradient_checkpointing)) {
    m.set("train.gradient_checkpointing", true, checkpointing ? "" : d.name + " default");
  }
  for (const char* key : {"gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"}) {
    m.unmapped(key, "Ferry's checkpointing recomputes each decoder block in backward; it takes no options");
  }

  // Checkpoints, evaluation, logging: cadences in optimizer steps (rollouts in the RL stages).
  const std::string save_strategy = m.text("save_strategy").value_or("steps");
  const std::optional<int64_t> save_steps = m.integer("save_steps");
  if (save_strategy == "steps" && save_steps && *save_steps > 0) {
    set_steps(m, "train.save_every", *save_steps, units, "save_steps");
  } else if (save_strategy != "steps" && save_strategy != "no") {
    m.unmapped("save_strategy", "Ferry saves every train.save_every steps and at the end (" + save_strategy +
                                    " has no equivalent)");
  }
  if (auto v = m.integer("save_total_limit")) m.set("output.keep_last", *v);
  std::string eval_strategy = m.text("eval_strategy").value_or("no");
  if (auto v = m.text("evaluation_strategy")) eval_strategy = *v;  // transformers < 4.46
  if (eval_strategy == "steps") {
    if (rl) {
      m.unmapped("eval_steps", "Ferry's RL stages judge data.eval_file before the first rollout and after the last");
    } else if (auto v = m.integer("eval_steps")) {
      m.set("train.eval_every", *v);
    }
  } else if (eval_strategy != "no") {
    m.unmapped(m.has("eval_strategy") ? "eval_strategy" : "evaluation_strategy",
               "Ferry evaluates every train.eval_every steps and at the end (" + eval_strategy + " has no equivalent)");
  }
  if (eval_strategy == "no") m.unmapped("eval_steps", "eval_strategy is no, so TRL does not evaluate");
  if (auto v = m.number("logging_steps")) {
    if (*v >= 1 && *v == std::floor(*v)) {
      set_steps(m, "logging.log_every", static_cast<int64_t>(*v), units, "logging_steps");
    } else {
      m.unmapped("logging_steps", "a fraction of the run: Ferry logs every logging.log_every steps");
    }
  }
  m.unmapped_unless("logging_strategy", "steps", "Ferry logs every logging.log_every steps");
  if (auto reporters = m.names("report_to")) {
    std::vector<std::string> others;
    for (const auto& r : *reporters) {
      if (r == "tensorboard") {
        m.set("logging.tensorboard", true);
      } else if (r != "none") {
        others.push_back(r);
      }
    }
    if (!others.empty()) {
      m.unmapped("report_to", join(others, ", ") + ": Ferry writes TensorBoard event files and metrics.jsonl into "
                                                    "output.dir (logging.tensorboard, logging.jsonl)");
    }
  }
  if (auto v = m.text("resume_from_checkpoint")) {
    if (*v == "true" || *v == "True") {
      m.set("train.resume", "auto", "the latest checkpoint in output.dir");
    } else if (*v != "false" && *v != "False") {
      m.set("train.resume", *v, "a checkpoint folder: Ferry resumes from its own step-N folders, not transformers'");
    }
  }
  if (m.flag("use_cpu").value_or(false)) m.set("train.device", "cpu");
  if (auto v = m.number("ddp_timeout")) m.set("distributed.timeout", *v, "seconds, as ddp_timeout");
}

StepUnits map_trl_grpo(ForeignConfigMapper& m, const std::string& p, int64_t micro, int64_t accumulation) {
  const std::string& tool = m.tool();
  const int64_t generations = m.integer(p + "num_generations").value_or(8);
  if (m.has(p + "num_generations")) m.set("grpo.num_generations", generations);
  const std::optional<int64_t> batch = m.integer(p + "generation_batch_size");
  const std::optional<int64_t> per_generation = m.integer(p + "steps_per_generation");
  if (batch && per_generation) {
    throw ConfigError(m.where(p + "generation_batch_size") + ": " + p + "generation_batch_size and " + p +
                      "steps_per_generation cannot both be set (TRL refuses them too)");
  }
  int64_t steps_per_generation = accumulation;
  if (batch) {
    if (*batch % micro != 0) {
      throw ConfigError(m.where(p + "generation_batch_size") + ": " + p + "generation_batch_size (" +
                        std::to_string(*batch) + ") must be a multiple of the micro-batch (" + std::to_string(micro) +
                        "), as TRL requires");
    }
    steps_per_generation = *batch / micro;
  } else if (per_generation) {
    steps_per_generation = *per_generation;
  }
  const int64_t generation_batch = micro * steps_per_generation;
  m.set("grpo.generation_batch_size", generation_batch,
        batch ? "" : "TRL's generation batch: per_device_train_batch_size x " +
                         std::string(per_generation ? "steps_per_generation" : "gradient_accumulation_steps") + " = " +
                         std::to_string(micro) + " x " + std::to_string(steps_per_generation) +
                         " completions per rollout (one process)");
  const int64_t iterations = m.integer(p + "num_iterations").value_or(1);
  if (m.has(p + "num_iterations")) m.set("grpo.num_iterations", iterations);
  if (steps_per_generation % accumulation != 0) {
    m.note("Approximation: " + tool + " generates every " + std::to_string(steps_per_generation) +
           " micro-batches and steps the optimizer every " + std::to_string(accumulation) +
           "; Ferry learns each rollout in whole minibatches of train.micro_batch_size x train.grad_accumulation, "
           "the last one smaller.");
  }
  StepUnits units;
  units.optimizer_steps_per_rollout =
      static_cast<double>(iterations) * static_cast<double>(steps_per_generation) / static_cast<double>(accumulation);
  units.per_rollout = "num_iterations x generation batch / (micro-batch x accumulation) = " +
                      std::to_string(iterations) + " x " + std::to_string(generation_batch) + " / (" +
                      std::to_string(micro) + " x " + std::to_string(accumulation) + ")";

  if (auto v = m.integer(p + "max_completion_length")) {
    m.set("generation.max_new_tokens", *v);
  } else {
    m.set("generation.max_new_tokens", int64_t{512}, tool + "'s default max_completion_length (TRL's 512)");
  }
  if (auto v = m.number(p + "temperature")) m.set("generation.temperature", *v);
  if (auto v = m.number(p + "top_p")) m.set("generation.top_p", *v);
  if (auto v = m.integer(p + "top_k")) m.set("generation.top_k", *v);
  m.unmapped(p + "min_p", "Ferry samples with temperature, top_k and top_p only");
  m.unmapped_unless(p + "repetition_penalty", "1.0", "Ferry's sampler has no repetition penalty");
  m.unmapped(p + "generation_kwargs", "Ferry's sampler takes generation.* only");
  if (const YAML::Node* kwargs = m.node(p + "chat_template_kwargs")) {
    YAML::Emitter out;
    out.SetMapFormat(YAML::Flow);
    out << *kwargs;
    m.set_yaml("tokenizer.chat_template_kwargs", out.c_str());
  }

  if (auto v = m.number(p + "beta")) m.set("grpo.beta", *v);
  if (auto v = m.number(p + "epsilon")) m.set("grpo.epsilon", *v);
  if (auto v = m.number(p + "epsilon_high")) m.set("grpo.epsilon_high", *v);
  m.unmapped(p + "delta", "Ferry's GRPO has no two-sided clip (INTELLECT-2's delta)");
  if (auto v = m.text(p + "loss_type")) m.set("grpo.loss_type", *v, "the same names as TRL's GRPOConfig");
  if (auto v = m.text(p + "scale_rewards")) {
    const std::string s = *v == "true" || *v == "True" ? "group" : *v == "false" || *v == "False" ? "none" : *v;
    m.set("grpo.scale_rewards", s);
  }
  if (auto v = m.text(p + "importance_sampling_level")) m.set("grpo.importance_sampling_level", *v);
  if (auto v = m.flag(p + "mask_truncated_completions")) m.set("grpo.mask_truncated_completions", *v);
  if (auto v = m.flag(p + "use_bias_correction_kl")) m.set("grpo.use_bias_correction_kl", *v);
  for (const char* key : {"sapo_temperature_pos", "sapo_temperature_neg", "vespo_k_pos", "vespo_lambda_pos",
                          "vespo_k_neg", "vespo_lambda_neg"}) {
    if (auto v = m.number(p + key)) m.set(std::string("grpo.") + key, *v);
  }
  m.unmapped_unless(p + "top_entropy_quantile", "1.0", "Ferry's GRPO loss keeps every token");
  m.unmapped_unless(p + "entropy_coef", "0.0", "Ferry's GRPO has no entropy bonus");
  m.unmapped_unless(p + "use_adaptive_entropy", "false", "Ferry's GRPO has no entropy bonus");
  m.unmapped_unless(p + "cast_lm_head_to_fp32", "false", "Ferry's LM head runs in train.precision");
  m.unmapped_unless(p + "multi_objective_aggregation", "sum_then_normalize",
                    "Ferry sums the weighted rewards, then normalises within each group (sum_then_normalize)");
  m.unmapped_unless(p + "use_vllm", "false", "Ferry samples with its own KV-cache decoder (generation.*)");
  m.unmapped_unless(p + "sync_ref_model", "false", "Ferry's reference stays the starting policy");
  m.unmapped(p + "num_generations_eval", "Ferry judges one greedy answer per data.eval_file prompt");
  m.unmapped(p + "max_tool_calling_iterations", "Ferry's multi-turn rollouts: rollout.environment and "
                                                "rollout.max_turns (docs/environments.md)");
  if (auto v = m.flag(p + "shuffle_dataset")) m.set("data.shuffle", *v);

  // Rewards: a reward model folder, and TRL's named reward functions where Ferry has one. TRL's
  // reward list (and reward_weights) holds the model first, then the functions in order.
  std::vector<std::pair<size_t, std::string>> rewards;  // (position in TRL's list, Ferry reward)
  size_t position = 0;
  if (auto v = m.text(p + "reward_model_name_or_path")) {
    rewards.emplace_back(position++, "kind: model, path: " + yaml_scalar(*v));
  }
  if (auto funcs = m.names(p + "reward_funcs")) {
    std::vector<std::string> missing;
    for (const auto& f : *funcs) {
      if (f == "accuracy_reward") {
        rewards.emplace_back(position, "kind: verifier, match: numeric");
        m.comment("rewards", "accuracy_reward -> verifier numeric: Ferry compares the last number of the answer with "
                             "each prompt's gt_answer, read from TRL's `solution` column (data.columns; TRL compares "
                             "by math_verify: run TRL's function as a command reward for that)");
        if (!m.is_set("data.columns")) {
          m.set_yaml("data.columns", "{gt_answer: solution}", "TRL's accuracy_reward reads the solution column");
        }
      } else {
        missing.push_back(f);
      }
      ++position;
    }
    if (!missing.empty()) {
      m.unmapped(p + "reward_funcs", join(missing, ", ") + ": Python reward functions; run each as a command reward "
                                     "(rewards: [{kind: command, command: ...}]) with docs/data.md's three-line wrapper "
                                     "(scripts/reward-trl-function.py)");
    }
  }
  if (auto weights = m.names(p + "reward_weights")) {
    if (weights->size() != position) {
      throw ConfigError(m.where(p + "reward_weights") + ": " + p + "reward_weights has " +
                        std::to_string(weights->size()) + " weights for " + std::to_string(position) +
                        " rewards (TRL refuses that too)");
    }
    for (auto& [at, reward] : rewards) {
      double weight = 0;
      if (!YAML::convert<double>::decode(YAML::Node((*weights)[at]), weight)) {
        throw ConfigError(m.where(p + "reward_weights") + ": " + p + "reward_weights: expected numbers, got '" +
                          (*weights)[at] + "'");
      }
      reward += ", weight: " + number_text(weight);
    }
  }
  if (!rewards.empty()) {
    std::vector<std::string> items;
    for (const auto& [at, reward] : rewards) items.push_back("{" + reward + "}");
    m.set_yaml("rewards", "[" + join(items, ", ") + "]");
  }
  return units;
}

std::optional<std::string> data_path(const std::string& name, const std::string& subset, const std::string& split) {
  if (looks_local(name)) return name;
  if (!looks_like_hub_id(name)) return std::nullopt;
  std::string spec = "hf:" + name;
  if (!subset.empty() && subset != "default") spec += "/" + subset;
  if (!split.empty() && split != "train") spec += ":" + split;
  return spec;
}

void set_data_file(ForeignConfigMapper& m, const std::string& ferry_key, const std::string& source_key,
                   const std::string& name, const std::string& subset, const std::string& split) {
  const std::optional<std::string> path = data_path(name, subset, split);
  if (!path) {
    m.unmapped(source_key, "'" + name + "' is neither a local file nor an ORG/NAME hub dataset: set " + ferry_key +
                               " (.jsonl, .json, .parquet, a `datasets` folder or hf:ORG/NAME)");
    return;
  }
  m.set(ferry_key, *path,
        path->rfind("hf:", 0) == 0
            ? "hf: reads the dataset's Parquet files from the local Hugging Face hub cache, without network: fetch it "
              "first (datasets.load_dataset, or huggingface-cli download --repo-type dataset " + name + ")"
            : "");
}

void set_model_path(ForeignConfigMapper& m, const std::string& source_key, const std::string& name) {
  m.set("model.path", name,
        !looks_local(name) && looks_like_hub_id(name)
            ? "a Hugging Face hub name: Ferry reads it from the local hub cache; fetch it first (huggingface-cli "
              "download " + name + "), or give the model folder"
            : "");
  m.consume(source_key);
}

std::vector<std::string> lora_targets(ForeignConfigMapper& m, const std::string& source_key,
                                      const std::vector<std::string>& names) {
  std::vector<std::string> out, unknown;
  for (const auto& name : names) {
    if (name == "all-linear" || name == "all") {
      for (const auto& t : kAllLinear) {
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
      }
    } else if (std::find(kFerryLoraTargets.begin(), kFerryLoraTargets.end(), name) != kFerryLoraTargets.end()) {
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    } else {
      unknown.push_back(name);
    }
  }
  if (!unknown.empty()) {
    m.unmapped(source_key, join(unknown, ", ") + ": Ferry's LoRA adapts the decoder projections " +
                               join(kFerryLoraTargets, ", ") + (out.empty() ? "" : "; the others are kept"));
  }
  return out;
}

void set_peft_default_targets(ForeignConfigMapper& m, const std::string& tool) {
  m.set("lora.target_modules", std::vector<std::string>{"q_proj", "v_proj"},
        "no target modules in the file: " + tool + " leaves them to PEFT, whose default for Llama, Mistral, Qwen and "
        "Gemma models is q_proj and v_proj");
}

void set_chat_template_name(ForeignConfigMapper& m, const std::string& source_key, const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> shipped{
      {"chatml", "chatml"}, {"llama3", "llama3"}, {"llama2", "llama2"}, {"mistral", "mistral"},
      {"gemma3", "gemma3"}, {"qwen_25", "qwen2.5"}, {"qwen2.5", "qwen2.5"}};
  if (name == "tokenizer_default" || name == "auto") {
    m.set("tokenizer.chat_template", "auto", "the tokenizer's own Jinja chat template");
    m.consume(source_key);
    return;
  }
  for (const auto& [theirs, ours] : shipped) {
    if (name == theirs) {
      m.set("tokenizer.chat_template", ours, "Ferry's shipped template of that format (configs/templates/" + ours +
                                                 ".yaml)");
      m.consume(source_key);
      return;
    }
  }
  m.unmapped(source_key, "'" + name + "' is " + m.tool() + "'s own template; Ferry uses the tokenizer's Jinja "
                         "template (tokenizer.chat_template: auto) or a shipped one (configs/templates)");
}

}  // namespace ferry::config_import
