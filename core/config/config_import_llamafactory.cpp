// LLaMA-Factory's YAML (`llamafactory-cli train FILE`) as a Ferry config: model_name_or_path,
// stage, finetuning_type and lora_*, template, cutoff_len, pref_* and ppo_* keys, and the
// transformers TrainingArguments it passes on. Defaults are its hparams' (finetuning_args.py,
// data_args.py, generating_args.py); docs/from-trl.md's LLaMA-Factory section is the table.
#include "core/config/config_import_shared.h"
#include "core/error.h"
#include "core/text.h"

namespace ferry::config_import {
namespace {

void map_model(ForeignConfigMapper& m) {
  if (auto v = m.text("model_name_or_path")) set_model_path(m, "model_name_or_path", *v);
  m.unmapped("adapter_name_or_path", "Ferry starts new adapters; merge this one into the base first (ferry export "
                                     "writes merged folders)");
  m.unmapped_unless("trust_remote_code", "false", "Ferry runs no Python from the hub; it trains the families in "
                                                  "docs/models.md");
  const std::optional<std::string> type = m.text("finetuning_type");
  if (!type || *type == "lora") {
    const std::optional<int64_t> rank = m.integer("lora_rank");
    const std::string why = type ? "" : "LLaMA-Factory's default finetuning_type lora";
    m.set("lora.rank", rank.value_or(8), rank ? why : why + (why.empty() ? "" : ", ") + "its default lora_rank 8");
    const std::optional<double> alpha = m.number("lora_alpha");
    m.set("lora.alpha", alpha.value_or(2.0 * static_cast<double>(rank.value_or(8))),
          alpha ? "" : "LLaMA-Factory's default lora_alpha: lora_rank x 2");
    if (auto v = m.number("lora_dropout")) m.set("lora.dropout", *v);
    const std::vector<std::string> names = m.names("lora_target").value_or(std::vector<std::string>{"all"});
    if (const auto targets = lora_targets(m, "lora_target", names); !targets.empty()) {
      m.set("lora.target_modules", targets, m.has("lora_target") ? "" : "LLaMA-Factory's default lora_target all");
    }
    m.unmapped("additional_target", "Ferry trains only the adapters");
    m.unmapped_unless("use_rslora", "false", "Ferry scales LoRA by alpha / rank (for rsLoRA's scale set lora.alpha "
                                             "to alpha x sqrt(rank))");
    m.unmapped_unless("use_dora", "false", "Ferry's adapters are LoRA; DoRA has no equivalent");
    m.unmapped_unless("pissa_init", "false", "Ferry's adapters start as LoRA's (B = 0)");
    m.unmapped("loraplus_lr_ratio", "Ferry trains both LoRA matrices at train.learning_rate");
  } else if (*type != "full") {
    m.unmapped("finetuning_type", *type + " has no Ferry equivalent: this config trains every weight (set lora.rank "
                                          "for LoRA)");
  }
  for (const char* key : {"lora_rank", "lora_alpha", "lora_dropout", "lora_target", "freeze_trainable_layers",
                          "freeze_trainable_modules", "freeze_extra_modules"}) {
    m.consume(key);  // LLaMA-Factory ignores the other method's keys too
  }
  if (auto bits = m.integer("quantization_bit")) {
    if (*bits == 4) {
      m.set("lora.quantize_base", "nf4", "QLoRA: bitsandbytes' 4-bit NormalFloat");
      if (auto v = m.flag("double_quantization")) m.set("lora.double_quant", *v);
      m.unmapped_unless("quantization_type", "nf4", "Ferry's 4-bit base is NF4 only");
    } else if (*bits == 8) {
      m.set("lora.quantize_base", "int8", "bitsandbytes' row-wise int8 storage; Ferry keeps no fp16 outlier columns");
    } else {
      m.unmapped("quantization_bit", "Ferry quantises the base to 4 (nf4) or 8 (int8) bits");
    }
  }
  m.consume("double_quantization");
  m.consume("quantization_type");
  m.unmapped_unless("quantization_method", "bnb", "Ferry quantises as bitsandbytes does (nf4, int8) or keeps a GGUF "
                                                  "file's blocks (lora.quantize_base gguf)");
}

void map_data(ForeignConfigMapper& m, Stage stage) {
  const std::string file_key = stage == Stage::ppo ? "data.prompt_file" : "data.train_file";
  m.unmapped("dataset", "LLaMA-Factory names datasets in dataset_dir/dataset_info.json: set " + file_key +
                        " to the entry's file_name (a local file) or hf:REPO (its hf_hub_url), and data.columns / "
                        "data.tags from its columns / tags (docs/data.md)");
  m.unmapped("eval_dataset", "set data.eval_file to the entry's file (see dataset)");
  m.consume("dataset_dir");
  const std::optional<int64_t> cutoff = m.integer("cutoff_len");
  m.set("data.max_length", cutoff.value_or(2048),
        std::string(cutoff ? "" : "LLaMA-Factory's default cutoff_len; ") +
            "LLaMA-Factory cuts prompt and answer in proportion to fit; Ferry keeps a conversation's whole rounds "
            "(user turn + answer) that fit, dropping it when its first round does not, and cuts a text or "
            "prompt/completion row at max_length");
  if (auto v = m.integer("max_samples")) {
    m.set("data.max_samples", *v, "LLaMA-Factory's max_samples counts per dataset; Ferry's counts the one train file");
  }
  if (auto v = m.number("val_size")) {
    if (*v > 0 && *v < 1) {
      m.set("data.eval_fraction", *v);
    } else if (*v >= 1) {
      m.unmapped("val_size", "a row count: Ferry holds out a fraction (data.eval_fraction)");
    }
  }
  const bool neat = m.flag("neat_packing").value_or(false);
  if (auto v = m.flag("packing"); v || neat) {
    const bool on = v.value_or(false) || neat;
    m.set("data.packing", on, on && !neat ? "Ferry's packed samples never attend to each other (LLaMA-Factory's "
                                            "neat_packing); its plain packing lets them" : "");
  }
  m.unmapped_unless("train_on_prompt", "false", "Ferry never trains on the prompt");
  m.unmapped_unless("mask_history", "false", "Ferry trains on every assistant turn, not the last one alone");
  for (const char* key : {"streaming", "buffer_size", "mix_strategy", "interleave_probs"}) {
    m.unmapped_unless(key, key == std::string("streaming") ? "false" : "", "Ferry reads one file from start to end");
  }
  m.unmapped("tool_format", "Ferry renders tool calls with the chat template (rollout.tool_call_format for RL)");
}

void map_preference(ForeignConfigMapper& m, Stage stage) {
  if (stage == Stage::kto) {
    if (auto v = m.number("pref_beta")) m.set("kto.beta", *v);
    if (auto v = m.number("kto_chosen_weight")) m.set("kto.desirable_weight", *v);
    if (auto v = m.number("kto_rejected_weight")) m.set("kto.undesirable_weight", *v);
    if (auto v = m.number("pref_ftx"); v && *v > 0) m.unmapped("pref_ftx", "Ferry's KTO adds no SFT term");
    if (auto v = m.text("ref_model")) {
      m.set("kto.reference", "model");
      m.set("kto.reference_model", *v);
    }
    return;
  }
  if (stage != Stage::dpo) return;
  if (auto v = m.number("pref_beta")) m.set("dpo.beta", *v);
  const std::string loss = m.text("pref_loss").value_or("sigmoid");
  const double ftx = m.number("pref_ftx").value_or(0.0);
  if (loss == "kto_pair") {
    m.unmapped("pref_loss", "kto_pair has no Ferry equivalent: Ferry's KTO is stage kto on unpaired rows");
  } else if (loss == "simpo") {
    m.set("dpo.loss_type", "simpo");
    if (ftx > 0) m.set("dpo.cpo_alpha", ftx, "pref_ftx: the chosen answers' NLL added to SimPO (CPO-SimPO)");
  } else if (loss == "orpo") {
    m.set("dpo.loss_type", "orpo", "ORPO's loss holds the chosen answers' NLL; dpo.beta is its lambda");
    if (ftx > 0) m.unmapped("pref_ftx", "ORPO already adds the chosen answers' NLL");
  } else if (ftx > 0) {
    m.set("dpo.loss_type", std::vector<std::string>{loss, "sft"},
          "pref_ftx: plus the chosen answers' NLL (LLaMA-Factory averages it per answer, Ferry over the batch's tokens)");
    m.set("dpo.loss_weights", std::vector<double>{1.0, ftx});
  } else if (loss != "sigmoid") {
    m.set("dpo.loss_type", loss);
  }
  if (auto v = m.number("simpo_gamma")) m.set("dpo.simpo_gamma", *v);
  if (auto v = m.number("dpo_label_smoothing")) m.set("dpo.label_smoothing", *v);
  if (auto v = m.number("ld_alpha")) m.set("dpo.ld_alpha", *v);
  m.unmapped_unless("pref_bco_weight", "0.0", "Ferry's DPO mixes bco_pair by dpo.loss_type [sigmoid, bco_pair] with "
                                              "dpo.loss_weights");
  if (auto v = m.text("ref_model")) {
    m.set("dpo.reference", "model");
    m.set("dpo.reference_model", *v);
  }
}

void map_ppo(ForeignConfigMapper& m, int64_t micro, int64_t accumulation) {
  if (auto v = m.text("reward_model")) {
    const std::string type = m.text("reward_model_type").value_or("lora");
    if (type == "full") {
      m.set("ppo.reward_model", *v);
    } else {
      m.set("ppo.reward_model", *v, "LLaMA-Factory's reward_model_type " + type + " names a LoRA adapter or an API; "
                                    "Ferry needs a whole reward model folder (ferry train-rm's final/)");
    }
  }
  const std::optional<int64_t> epochs = m.integer("ppo_epochs");
  m.set("ppo.ppo_epochs", epochs.value_or(4), epochs ? "" : "LLaMA-Factory's default ppo_epochs");
  const int64_t buffer = m.integer("ppo_buffer_size").value_or(1);
  m.set("ppo.rollout_batch_size", micro * accumulation * buffer,
        "LLaMA-Factory's rollout: per_device_train_batch_size x gradient_accumulation_steps x ppo_buffer_size "
        "prompts; learned in minibatches of micro x accumulation, as Ferry's");
  if (auto v = m.flag("ppo_score_norm")) m.set("ppo.normalize_reward", *v);
  m.unmapped_unless("ppo_whiten_rewards", "false", "Ferry whitens advantages (ppo.whiten_advantages), not rewards");
  if (auto v = m.number("ppo_target")) {
    m.set("ppo.kl_target", *v, "the adaptive KL controller's target KL per response; ppo.kl_coef is where it starts");
  }
  m.note("LLaMA-Factory's PPO steps (max_steps, save_steps) are rollouts, as Ferry's.");
  const std::optional<int64_t> tokens = m.integer("max_new_tokens");
  m.set("generation.max_new_tokens", tokens.value_or(1024), tokens ? "" : "LLaMA-Factory's default max_new_tokens");
  const std::optional<double> temperature = m.number("temperature");
  m.set("generation.temperature", temperature.value_or(0.95), temperature ? "" : "LLaMA-Factory's default temperature");
  const std::optional<double> top_p = m.number("top_p");
  m.set("generation.top_p", top_p.value_or(0.7), top_p ? "" : "LLaMA-Factory's default top_p");
  const std::optional<int64_t> top_k = m.integer("top_k");
  m.set("generation.top_k", top_k.value_or(50), top_k ? "" : "LLaMA-Factory's default top_k");
  if (!m.flag("do_sample").value_or(true)) m.set("generation.greedy", true);
  m.unmapped_unless("repetition_penalty", "1.0", "Ferry's sampler has no repetition penalty");
  m.unmapped_unless("num_beams", "1", "Ferry samples; it has no beam search");
  m.unmapped("max_length", "generation.max_new_tokens bounds each answer");
}

}  // namespace

Stage llamafactory_stage(ForeignConfigMapper& m) {
  const std::optional<std::string> stage = m.peek("stage");
  if (!stage) return Stage::any;
  for (const auto& [name, value] : {std::pair{"sft", Stage::sft}, std::pair{"rm", Stage::rm},
                                    std::pair{"dpo", Stage::dpo}, std::pair{"kto", Stage::kto},
                                    std::pair{"ppo", Stage::ppo}}) {
    if (*stage == name) return value;
  }
  throw ConfigError(m.where("stage") + ": stage: " + *stage + " has no Ferry stage (Ferry imports LLaMA-Factory's "
                    "sft, rm, dpo, kto and ppo" + (*stage == "pt" ? "; for pre-training text, use stage sft on "
                    "{\"text\": ...} rows" : "") + ")");
}

void map_llamafactory(ForeignConfigMapper& m, Stage stage) {
  if (stage == Stage::grpo || stage == Stage::distill) {
    throw ConfigError(m.file() + ": LLaMA-Factory configs import as stage sft, rm, dpo, kto or ppo (got " +
                      std::string(enum_name(stage)) + ")");
  }
  m.consume("stage");
  m.consume("do_train");
  m.unmapped_unless("do_eval", "false", "Ferry evaluates data.eval_file (or data.eval_fraction) during training");
  m.unmapped_unless("do_predict", "false", "use `ferry generate` / `ferry eval` after training");
  m.note("LLaMA-Factory's defaults are written where Ferry's differ and change what is trained.");
  map_model(m);
  if (auto v = m.text("template")) set_chat_template_name(m, "template", *v);
  map_data(m, stage);

  const int64_t micro = m.integer("per_device_train_batch_size").value_or(8);
  const int64_t accumulation = m.integer("gradient_accumulation_steps").value_or(1);
  const std::optional<bool> no_checkpointing = m.flag("disable_gradient_checkpointing");
  TrainerDefaults d;
  d.name = "LLaMA-Factory's";
  d.learning_rate = 5e-5;
  d.bf16 = false;
  d.gradient_checkpointing = !no_checkpointing.value_or(false);
  map_trainer_arguments(m, stage, d, StepUnits{});
  if (no_checkpointing.value_or(false)) m.set("train.gradient_checkpointing", false);
  if (m.flag("pure_bf16").value_or(false)) {
    m.set("train.precision", "bf16", "pure_bf16: LLaMA-Factory keeps no fp32 copy; Ferry keeps fp32 master weights "
                                     "(offload.master_weights bf16_stochastic keeps only bf16 ones)");
  }
  map_preference(m, stage);
  if (stage == Stage::ppo) map_ppo(m, micro, accumulation);
}

std::string llamafactory_reason(const std::string& key) {
  if (std::string common = common_reason(key); !common.empty()) return common;
  for (const char* k : {"upcast_layernorm", "upcast_lmhead_output", "use_reentrant_gc", "shift_attn", "rope_scaling",
                        "mixture_of_depths", "moe_aux_loss_coef", "print_param_status", "infer_backend"}) {
    if (key == k) return "a LLaMA-Factory model option with no Ferry equivalent";
  }
  for (const char* prefix : {"galore_", "apollo_", "badam_", "use_galore", "use_apollo", "use_badam"}) {
    if (key.rfind(prefix, 0) == 0) return "Ferry's optimizer is AdamW on every trained weight";
  }
  return "no Ferry equivalent (a LLaMA-Factory option Ferry does not map)";
}

}  // namespace ferry::config_import
