// TRL's CLI YAML (`trl sft|dpo|grpo|reward|kto --config FILE`: the keys of ScriptArguments, the
// stage's config class with transformers' TrainingArguments, ModelConfig, DatasetMixtureConfig)
// as a Ferry config. Defaults and meanings are TRL 1.16's; docs/from-trl.md is the table.
#include <algorithm>

#include "core/config/config_enum.h"
#include "core/config/config_import_shared.h"
#include "core/error.h"
#include "core/text.h"

namespace ferry::config_import {
namespace {

struct TrlStage {
  std::string config;        // "SFTConfig"
  double learning_rate;      // its default
  bool disables_dropout;     // disable_dropout defaults to true (and zeroes LoRA's dropout too)
};

TrlStage trl_stage(const ForeignConfigMapper& m, Stage stage) {
  switch (stage) {
    case Stage::sft: return {"SFTConfig", 2e-5, false};
    case Stage::dpo: return {"DPOConfig", 1e-6, true};
    case Stage::rm: return {"RewardConfig", 1e-4, true};
    case Stage::kto: return {"KTOConfig", 1e-6, true};
    case Stage::grpo: return {"GRPOConfig", 1e-6, false};
    default:
      throw ConfigError(m.file() + ": TRL configs import as stage sft, dpo, grpo, rm or kto (got " +
                        std::string(enum_name(stage)) + "); TRL's PPO and online trainers are experimental: write the "
                        "Ferry config from configs/demo-ppo.yaml");
  }
}

void map_model(ForeignConfigMapper& m, Stage stage, const TrlStage& s) {
  if (auto v = m.text("model_name_or_path")) set_model_path(m, "model_name_or_path", *v);
  m.unmapped_unless("model_revision", "main", "Ferry reads the folder in model.path: download that revision");
  for (const char* key : {"dtype", "torch_dtype"}) {
    m.unmapped_unless(key, "float32", "Ferry keeps fp32 master weights and computes in train.precision (weights "
                                      "held in bf16 alone: offload.master_weights bf16_stochastic)");
  }
  m.unmapped_unless("trust_remote_code", "false", "Ferry runs no Python from the hub; it trains the families in "
                                                  "docs/models.md");
  m.consume("lora_task_type");  // Ferry picks the head from the stage

  const bool peft = m.flag("use_peft").value_or(false);
  const std::optional<bool> disable_dropout = m.flag("disable_dropout");
  if (peft) {
    const std::optional<int64_t> rank = m.integer("lora_r");
    m.set("lora.rank", rank.value_or(16), rank ? "" : "ModelConfig's default lora_r");
    const std::optional<double> alpha = m.number("lora_alpha");
    m.set("lora.alpha", alpha.value_or(32.0), alpha ? "" : "ModelConfig's default lora_alpha");
    const std::optional<double> dropout = m.number("lora_dropout");
    if (s.disables_dropout && disable_dropout.value_or(true)) {
      if (dropout.value_or(0.05) != 0) {
        m.comment("lora.rank", "lora_dropout " + number_text(dropout.value_or(0.05)) + " is not applied: " + s.config +
                                   "'s disable_dropout (true by default) zeroes every dropout after PEFT wraps the "
                                   "model, LoRA's too, so lora.dropout stays 0");
      }
    } else {
      m.set("lora.dropout", dropout.value_or(0.05), dropout ? "" : "ModelConfig's default lora_dropout");
    }
    if (auto names = m.names("lora_target_modules")) {
      const std::vector<std::string> targets = lora_targets(m, "lora_target_modules", *names);
      if (!targets.empty()) m.set("lora.target_modules", targets);
    } else {
      set_peft_default_targets(m, "TRL");
    }
    m.unmapped_unless("use_rslora", "false", "Ferry scales LoRA by alpha / rank (rsLoRA's alpha / sqrt(rank): set "
                                             "lora.alpha to alpha x sqrt(rank) for the same scale)");
    m.unmapped_unless("use_dora", "false", "Ferry's adapters are LoRA; DoRA's magnitude vector has no equivalent");
    m.unmapped("lora_target_parameters", "Ferry's LoRA adapts the projections in lora.target_modules");
    m.unmapped("lora_modules_to_save", "Ferry trains only the adapters (and the score head of a reward model)");
  } else {
    for (const char* key : {"lora_r", "lora_alpha", "lora_dropout", "lora_target_modules", "use_rslora", "use_dora",
                            "lora_target_parameters", "lora_modules_to_save"}) {
      m.consume(key);  // TRL ignores them too without use_peft
    }
  }
  if (!s.disables_dropout && disable_dropout.value_or(false)) {
    m.set("lora.dropout", 0.0, "disable_dropout: true");
  }

  const bool eight_bit = m.flag("load_in_8bit").value_or(false);
  if (m.flag("load_in_4bit").value_or(false)) {
    m.set("lora.quantize_base", "nf4", "QLoRA: the frozen projections in bitsandbytes' 4-bit NormalFloat");
    const std::optional<bool> nested = m.flag("use_bnb_nested_quant");
    m.set("lora.double_quant", nested.value_or(false), nested ? "" : "ModelConfig's default use_bnb_nested_quant");
    m.unmapped_unless("bnb_4bit_quant_type", "nf4", "Ferry's 4-bit base is NF4 only");
  } else if (eight_bit) {
    m.set("lora.quantize_base", "int8", "bitsandbytes' row-wise int8 storage; Ferry keeps no fp16 outlier columns");
  }
  for (const char* key : {"bnb_4bit_quant_type", "use_bnb_nested_quant"}) m.consume(key);
  m.unmapped("bnb_4bit_quant_storage", "Ferry stores NF4 weights as bitsandbytes does by default (uint8)");
  (void)stage;
}

void map_data(ForeignConfigMapper& m, Stage stage) {
  const std::string file_key = stage == Stage::grpo ? "data.prompt_file" : "data.train_file";
  const std::string subset = m.text("dataset_config").value_or("");
  const std::string train_split = m.text("dataset_train_split").value_or("train");
  const std::string test_split = m.text("dataset_test_split").value_or("test");
  const std::string eval_strategy = m.peek("eval_strategy").value_or(m.peek("evaluation_strategy").value_or("no"));
  std::string name;
  const YAML::Node* mixture = m.node("datasets");
  if (mixture != nullptr && mixture->IsSequence() && mixture->size() > 0) {
    m.unmapped("dataset_name", "`datasets` is given, which TRL reads instead");
    const YAML::Node& first = (*mixture)[0];
    if (!first.IsMap() || !first["path"]) {
      throw ConfigError(m.where("datasets") + ": datasets: each entry needs a `path` (TRL's DatasetConfig)");
    }
    name = first["path"].Scalar();
    const std::string split = first["split"] ? first["split"].Scalar() : "train";
    const std::string config_name = first["name"] && !first["name"].IsNull() ? first["name"].Scalar() : "";
    if (first["data_files"] && first["data_files"].IsScalar()) {
      set_data_file(m, file_key, "datasets", first["data_files"].Scalar());  // load_dataset("json", data_files=...)
    } else {
      set_data_file(m, file_key, "datasets", name, config_name, split);
    }
    for (const char* key : {"columns", "fraction", "data_dir"}) {
      if (first[key] && !first[key].IsNull()) {
        m.unmapped_part(std::string("datasets[0].") + key, "Ferry reads the whole file with its own column names "
                                                           "(docs/data.md)");
      }
    }
    for (size_t i = 1; i < mixture->size(); ++i) {
      m.unmapped_part("datasets[" + std::to_string(i) + "]",
                      "Ferry reads one training file: merge this dataset into " + file_key);
    }
  } else if (auto v = m.text("dataset_name")) {
    name = *v;
    set_data_file(m, file_key, "dataset_name", name, subset, train_split);
  }
  if (!subset.empty() && !name.empty() && data_path(name, "", "").value_or("").rfind("hf:", 0) != 0) {
    m.unmapped("dataset_config", "a local file has no subsets");
  }
  const bool evaluates = eval_strategy != "no";
  if (evaluates && !name.empty() && mixture == nullptr) {
    if (stage == Stage::grpo) {
      m.unmapped_part("dataset_test_split", "Ferry's GRPO judges data.eval_file's prompts (with gt_answer) greedily "
                                            "before and after training: set it to have that");
    } else if (auto path = data_path(name, subset, test_split); path && path->rfind("hf:", 0) == 0) {
      m.set("data.eval_file", *path, "TRL evaluates on dataset_test_split when eval_strategy is not no");
    }
  }
  if (auto v = m.number("test_split_size")) m.set("data.eval_fraction", *v);
  for (const char* key : {"dataset_streaming", "streaming"}) {
    m.unmapped_unless(key, "false", "Ferry streams rows from the local file or hub cache; there is no network mode");
  }
  m.unmapped_unless("ignore_bias_buffers", "false", "a DDP workaround Ferry does not need");
  m.unmapped("env", "environment variables: set them in the shell that runs ferry");
}

void map_max_length(ForeignConfigMapper& m, Stage stage, const TrlStage& s) {
  std::optional<int64_t> length = m.integer("max_length");
  if (auto old = m.integer("max_seq_length"); old && !length) length = old;  // SFTConfig before TRL 0.20
  const std::string what =
      stage == Stage::sft ? "TRL cuts a longer sequence to its first max_length tokens; so does Ferry for text and "
                            "prompt/completion rows, but a conversation keeps the whole rounds (user turn + answer) "
                            "that fit, and one whose first round does not fit is dropped"
                          : "TRL cuts a longer prompt + answer to its first max_length tokens; Ferry cuts the answer "
                            "alike but drops a pair whose prompt alone fills max_length (an error unless "
                            "data.skip_bad_lines)";
  if (length) {
    m.set("data.max_length", *length, what);
  } else {
    m.set("data.max_length", int64_t{1024}, s.config + "'s default max_length; " + what);
  }
  m.unmapped_unless("truncation_mode", "keep_start", "Ferry keeps the start of a sequence");
}

void map_sft(ForeignConfigMapper& m, const TrlStage& s) {
  map_max_length(m, Stage::sft, s);
  if (auto v = m.flag("packing")) {
    m.set("data.packing", *v, *v ? "Ferry's packing keeps attention within each sample (as TRL's bfd with "
                                   "padding-free attention)" : "");
  }
  m.unmapped_unless("packing_strategy", "bfd", "Ferry packs whole samples (best fit); it never splits one");
  m.unmapped_unless("padding_free", "false", "Ferry pads a batch unless data.packing is on");
  m.unmapped("eval_packing", "Ferry's eval batches follow data.packing");
  m.unmapped_unless("completion_only_loss", "true", "Ferry never trains on the prompt: the loss covers the "
                                                    "completion (or assistant turns) only");
  m.unmapped_unless("assistant_only_loss", "true", "Ferry trains on the assistant turns only (their content and "
                                                   "end-of-turn marker), never on system or user tokens");
  m.note("Loss: Ferry trains on each assistant message's content and its end-of-turn marker (TRL's "
         "assistant_only_loss: true), on the completion of a prompt/completion row and on every token of a text row. "
         "TRL's default for conversations trains on every token, system and user turns included.");
  m.unmapped_unless("loss_type", "nll", "Ferry's SFT loss is the token NLL (DFT has no equivalent)");
  m.unmapped_unless("dataset_text_field", "text", "Ferry reads the `text` column: rename it, or data.columns "
                                                  "(docs/data.md)");
  m.unmapped("dataset_kwargs", "Ferry prepares every dataset itself");
  m.unmapped("eos_token", "Ferry ends each assistant turn with the chat template's end-of-turn marker");
  m.consume("shuffle_dataset");  // the Trainer shuffles each epoch anyway, as Ferry does (data.shuffle)
  if (m.flag("activation_offloading").value_or(false)) m.set("train.activation_offload", true);
}

void map_dpo(ForeignConfigMapper& m, const TrlStage& s) {
  map_max_length(m, Stage::dpo, s);
  if (auto losses = m.names("loss_type")) {
    std::vector<std::string> known, unknown;
    for (const auto& l : *losses) {
      DpoLoss value{};
      (enum_parse(l, value) ? known : unknown).push_back(l);
    }
    if (!unknown.empty()) m.unmapped("loss_type", join(unknown, ", ") + ": not among Ferry's dpo.loss_type names");
    if (!known.empty() && unknown.empty()) m.set("dpo.loss_type", known, "TRL's names");
  }
  if (auto weights = m.node("loss_weights"); weights != nullptr && weights->IsSequence()) {
    std::vector<double> values;
    for (const auto& w : *weights) {
      double value = 0;
      if (!YAML::convert<double>::decode(w, value)) {
        throw ConfigError(m.where("loss_weights") + ": loss_weights: expected a list of numbers");
      }
      values.push_back(value);
    }
    m.set("dpo.loss_weights", values);
  }
  for (const char* key : {"beta", "label_smoothing", "ld_alpha", "f_alpha_divergence_coef", "discopop_tau"}) {
    if (auto v = m.number(key)) m.set(std::string("dpo.") + key, *v);
  }
  if (auto v = m.text("f_divergence_type")) m.set("dpo.f_divergence_type", *v);
  if (m.flag("precompute_ref_log_probs").value_or(false)) {
    m.set("dpo.reference", "precompute");
  }
  m.unmapped("precompute_ref_batch_size", "Ferry precomputes in micro-batches of train.micro_batch_size");
  m.unmapped_unless("use_weighting", "false", "Ferry's DPO has no WPO weighting");
  m.unmapped_unless("sync_ref_model", "false", "Ferry's reference stays the starting policy (no TR-DPO)");
  for (const char* key : {"ref_model_mixup_alpha", "ref_model_sync_steps"}) m.consume(key);
  m.unmapped("rpo_alpha", "write it as dpo.loss_type [sigmoid, sft] with dpo.loss_weights [1, rpo_alpha]");
  if (m.flag("activation_offloading").value_or(false)) m.set("train.activation_offload", true);
}

void map_rm(ForeignConfigMapper& m, const TrlStage& s) {
  map_max_length(m, Stage::rm, s);
  if (auto v = m.number("center_rewards_coefficient")) m.set("rm.center_rewards_coefficient", *v);
  if (m.flag("activation_offloading").value_or(false)) m.set("train.activation_offload", true);
}

void map_kto(ForeignConfigMapper& m, const TrlStage& s) {
  map_max_length(m, Stage::kto, s);
  if (auto v = m.text("loss_type")) m.set("kto.loss_type", *v);
  for (const char* key : {"beta", "desirable_weight", "undesirable_weight"}) {
    if (auto v = m.number(key)) m.set(std::string("kto.") + key, *v);
  }
  if (m.flag("precompute_ref_log_probs").value_or(false)) m.set("kto.reference", "precompute");
  m.unmapped("precompute_ref_batch_size", "Ferry precomputes in micro-batches of train.micro_batch_size");
  m.unmapped_unless("sync_ref_model", "false", "Ferry's reference stays the starting policy");
  for (const char* key : {"ref_model_mixup_alpha", "ref_model_sync_steps"}) m.consume(key);
  if (m.flag("activation_offloading").value_or(false)) m.set("train.activation_offload", true);
}

}  // namespace

void map_trl(ForeignConfigMapper& m, Stage stage) {
  const TrlStage s = trl_stage(m, stage);
  m.note("TRL's defaults (TRL 1.16, " + s.config + ", ModelConfig) are written where Ferry's differ and change what "
         "is trained.");
  map_model(m, stage, s);
  map_data(m, stage);
  StepUnits units;
  if (stage == Stage::grpo) {
    const int64_t micro = m.integer("per_device_train_batch_size").value_or(8);
    const int64_t accumulation = m.integer("gradient_accumulation_steps").value_or(1);
    units = map_trl_grpo(m, "", micro, accumulation);
    m.note("Prompts: Ferry skips a prompt of data.max_length tokens or more; TRL keeps every prompt whole.");
  }
  TrainerDefaults d;
  d.name = "TRL's " + s.config;
  d.learning_rate = s.learning_rate;
  d.bf16 = true;
  d.gradient_checkpointing = true;
  map_trainer_arguments(m, stage, d, units);
  if (auto v = m.text("chat_template_path")) {
    if (v->size() > 6 && v->compare(v->size() - 6, 6, ".jinja") == 0) {
      m.set("tokenizer.chat_template", *v);
    } else {
      m.unmapped("chat_template_path", "Ferry takes a .jinja file or a shipped template name as "
                                       "tokenizer.chat_template, not another tokenizer's folder");
    }
  }
  m.unmapped("model_init_kwargs", "Ferry loads the model itself (model.path, train.precision)");
  m.unmapped_unless("pad_to_multiple_of", "auto", "Ferry pads a batch to its longest row");
  switch (stage) {
    case Stage::sft: map_sft(m, s); break;
    case Stage::dpo: map_dpo(m, s); break;
    case Stage::rm: map_rm(m, s); break;
    case Stage::kto: map_kto(m, s); break;
    default: break;
  }
}

std::string trl_reason(const std::string& key) {
  if (std::string common = common_reason(key); !common.empty()) return common;
  if (key.rfind("vllm_", 0) == 0) return "Ferry samples with its own KV-cache decoder (generation.*)";
  for (const char* k : {"log_completions", "num_completions_to_print", "log_unique_prompts", "log_multimodal"}) {
    if (key == k) return "Ferry logs rewards and lengths to metrics.jsonl; completions are not logged";
  }
  if (key == "max_prompt_length") {
    return "Ferry does not cut prompts: it skips a prompt of data.max_length tokens or more (GRPO) or a pair whose "
           "prompt fills data.max_length (DPO)";
  }
  if (key == "router_aux_loss_coef") return "Ferry adds no router load-balancing loss";
  return "no Ferry equivalent (not a key of TRL's config classes that Ferry maps)";
}

}  // namespace ferry::config_import
