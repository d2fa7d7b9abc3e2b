// `ferry config import`'s tables (core/config/config_import.h) on configs written the way each
// tool's docs write them (tests/data/config_import/): the Ferry values expected from the other
// tool's documented meaning and defaults, the keys listed as unmapped, the unit conversions, and the
// errors that name the file. The result is read back with Ferry's own config parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "core/config/config_import.h"
#include "core/config/config_io.h"
#include "core/error.h"

namespace ferry {
namespace {

const std::string kData = std::string(FERRY_SOURCE_DIR) + "/tests/data/config_import/";

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

std::set<std::string> unmapped_keys(const ImportedConfig& imported) {
  std::set<std::string> keys;
  for (const auto& u : imported.unmapped) {
    EXPECT_FALSE(u.reason.empty()) << u.key;
    keys.insert(u.key);
  }
  return keys;
}

std::string reason_of(const ImportedConfig& imported, const std::string& key) {
  for (const auto& u : imported.unmapped) {
    if (u.key == key) return u.reason;
  }
  return "";
}

template <class Fn>
std::string config_error(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

const std::vector<std::string> kAllLinear{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

TEST(ConfigImport, TrlSft) {
  const ImportedConfig imported = import_foreign_config_file(ForeignTool::trl, kData + "trl_sft.yaml", Stage::sft);
  const Config c = parse_config(imported.yaml, "imported");
  EXPECT_EQ(c.stage, Stage::sft);
  EXPECT_EQ(c.model.path, "Qwen/Qwen2.5-0.5B");
  EXPECT_EQ(c.data.train_file, "hf:trl-lib/Capybara");
  EXPECT_EQ(c.data.eval_file, "hf:trl-lib/Capybara:test");  // eval_strategy steps: dataset_test_split
  EXPECT_EQ(c.data.max_length, 2048);
  EXPECT_TRUE(c.data.packing);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 2e-4);
  EXPECT_EQ(c.train.lr_scheduler, LrSchedule::cosine);  // cosine_with_min_lr + min_lr_rate
  EXPECT_DOUBLE_EQ(c.train.min_lr_ratio, 0.1);
  EXPECT_EQ(c.train.micro_batch_size, 2);
  EXPECT_EQ(c.train.grad_accumulation, 8);
  EXPECT_EQ(c.train.epochs, 1);
  EXPECT_EQ(c.train.max_steps, -1);
  EXPECT_EQ(c.train.seed, 1234);
  EXPECT_EQ(c.train.eval_every, 100);
  EXPECT_EQ(c.train.precision, Precision::bf16);  // SFTConfig: bf16 unless fp16
  EXPECT_TRUE(c.train.gradient_checkpointing);
  EXPECT_EQ(c.lora.rank, 32);
  EXPECT_DOUBLE_EQ(c.lora.alpha, 16.0);
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.05);  // ModelConfig's default, applied by SFT
  EXPECT_EQ(c.lora.target_modules, kAllLinear);
  EXPECT_EQ(c.output.dir, "Qwen2.5-0.5B-SFT");
  EXPECT_EQ(c.logging.log_every, 25);
  // warmup_steps 0.03 is a ratio (transformers 5) of a length the file does not give.
  EXPECT_EQ(unmapped_keys(imported), (std::set<std::string>{"warmup_steps", "push_to_hub"}));
  EXPECT_CONTAINS(reason_of(imported, "warmup_steps"), "train.warmup_steps");
  EXPECT_CONTAINS(imported.yaml, "# Loss: Ferry trains on each assistant message's content");
  EXPECT_CONTAINS(imported.yaml, "local Hugging Face hub cache");
}

TEST(ConfigImport, TrlGrpoCountsRolloutsNotOptimizerSteps) {
  const ImportedConfig imported = import_foreign_config_file(ForeignTool::trl, kData + "trl_grpo.yaml", Stage::grpo);
  const Config c = parse_config(imported.yaml, "imported");
  EXPECT_EQ(c.stage, Stage::grpo);
  EXPECT_EQ(c.data.prompt_file, "hf:trl-lib/DeepMath-103K");
  EXPECT_TRUE(c.data.train_file.empty());
  EXPECT_EQ(c.train.micro_batch_size, 4);
  EXPECT_EQ(c.train.grad_accumulation, 4);
  // TRL: one generation of 4 x 4 = 16 completions per gradient_accumulation_steps micro-batches,
  // reused num_iterations = 2 times: 2 optimizer steps per generation. max_steps 100 optimizer
  // steps = 50 rollouts; save_steps 50 = 25 rollouts.
  EXPECT_EQ(c.grpo.generation_batch_size, 16);
  EXPECT_EQ(c.grpo.num_iterations, 2);
  EXPECT_EQ(c.train.max_steps, 50);
  EXPECT_EQ(c.train.save_every, 25);
  EXPECT_CONTAINS(imported.yaml, "counts optimizer steps; Ferry counts rollouts");
  EXPECT_EQ(c.grpo.num_generations, 8);
  EXPECT_DOUBLE_EQ(c.grpo.beta, 0.04);
  EXPECT_EQ(c.grpo.loss_type, GrpoLoss::dr_grpo);
  EXPECT_EQ(c.grpo.scale_rewards, RewardScaling::none);  // scale_rewards: false
  EXPECT_EQ(c.generation.max_new_tokens, 256);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 1e-6);
  EXPECT_EQ(c.train.lr_scheduler, LrSchedule::linear);  // TrainingArguments' default
  EXPECT_EQ(c.lora.rank, 16);                           // ModelConfig's defaults
  EXPECT_DOUBLE_EQ(c.lora.alpha, 32.0);
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.05);  // GRPOConfig keeps dropout (disable_dropout false)
  EXPECT_EQ(c.lora.target_modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}));
  ASSERT_EQ(c.rewards.size(), 1u);  // accuracy_reward; think_format_reward is Python
  EXPECT_EQ(c.rewards[0].kind, RewardKind::verifier);
  EXPECT_EQ(c.data.columns.json, R"({"gt_answer":"solution"})");  // TRL's accuracy_reward reads `solution`
  EXPECT_EQ(c.rewards[0].match, AnswerMatch::numeric);
  EXPECT_EQ(unmapped_keys(imported), (std::set<std::string>{"reward_funcs", "use_vllm", "vllm_mode"}));
  EXPECT_CONTAINS(reason_of(imported, "reward_funcs"), "think_format_reward");
}

TEST(ConfigImport, TrlRewardWeightsFollowTrlsRewardOrder) {
  // TRL's reward list is the reward model, then the functions; reward_weights follows it.
  const ImportedConfig imported = import_foreign_config(
      ForeignTool::trl,
      "reward_model_name_or_path: runs/rm/final\nreward_funcs: [think_format_reward, accuracy_reward]\n"
      "reward_weights: [0.5, 0.2, 2.0]\n",
      "w.yaml", Stage::grpo);
  const Config c = parse_config(imported.yaml, "imported");
  ASSERT_EQ(c.rewards.size(), 2u);
  EXPECT_EQ(c.rewards[0].kind, RewardKind::model);
  EXPECT_EQ(c.rewards[0].path, "runs/rm/final");
  EXPECT_DOUBLE_EQ(c.rewards[0].weight, 0.5);
  EXPECT_EQ(c.rewards[1].kind, RewardKind::verifier);
  EXPECT_DOUBLE_EQ(c.rewards[1].weight, 2.0);
  EXPECT_EQ(unmapped_keys(imported), std::set<std::string>{"reward_funcs"});
  EXPECT_CONTAINS(config_error([] {
                    import_foreign_config(ForeignTool::trl, "reward_funcs: [accuracy_reward]\nreward_weights: [1, 2]\n",
                                          "x.yaml", Stage::grpo);
                  }),
                  "x.yaml:2");
}

TEST(ConfigImport, TrlDpoDisablesLoraDropoutAsDpoConfigDoes) {
  const ImportedConfig imported = import_foreign_config_file(ForeignTool::trl, kData + "trl_dpo.yaml", Stage::dpo);
  const Config c = parse_config(imported.yaml, "imported");
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.0);  // disable_dropout (default true) zeroes LoRA's dropout too
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 1e-6);
  EXPECT_EQ(c.data.max_length, 1024);
  EXPECT_EQ(c.train.warmup_steps, 20);  // ratio 0.1 of max_steps 200
  EXPECT_EQ(c.dpo.loss_type, (std::vector<DpoLoss>{DpoLoss::sigmoid, DpoLoss::sft}));
  EXPECT_EQ(c.dpo.loss_weights, (std::vector<double>{1.0, 0.5}));
  EXPECT_DOUBLE_EQ(c.dpo.beta, 0.2);
  EXPECT_EQ(c.lora.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));  // PEFT's default
  EXPECT_TRUE(imported.unmapped.empty());
}

TEST(ConfigImport, AxolotlQlora) {
  const ImportedConfig imported =
      import_foreign_config_file(ForeignTool::axolotl, kData + "axolotl_qlora.yaml", Stage::sft);
  const Config c = parse_config(imported.yaml, "imported");
  EXPECT_EQ(c.model.path, "NousResearch/Llama-3.2-1B");
  EXPECT_EQ(c.lora.rank, 32);
  EXPECT_DOUBLE_EQ(c.lora.alpha, 16.0);
  EXPECT_DOUBLE_EQ(c.lora.dropout, 0.05);
  EXPECT_EQ(c.lora.target_modules, kAllLinear);  // lora_target_linear
  EXPECT_EQ(c.lora.quantize_base, BaseQuantization::nf4);
  EXPECT_TRUE(c.lora.double_quant);
  EXPECT_EQ(c.data.train_file, "hf:teknium/GPT4-LLM-Cleaned");
  EXPECT_DOUBLE_EQ(c.data.eval_fraction, 0.1);
  EXPECT_EQ(c.data.max_length, 2048);
  EXPECT_TRUE(c.data.packing);
  EXPECT_EQ(c.train.micro_batch_size, 2);
  EXPECT_EQ(c.train.grad_accumulation, 4);
  EXPECT_EQ(c.train.epochs, 1);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 2e-4);
  EXPECT_EQ(c.train.lr_scheduler, LrSchedule::cosine);
  EXPECT_EQ(c.train.warmup_steps, 10);
  EXPECT_EQ(c.train.precision, Precision::bf16);  // bf16: auto
  EXPECT_TRUE(c.train.gradient_checkpointing);
  EXPECT_EQ(c.logging.log_every, 1);
  EXPECT_EQ(c.output.dir, "./outputs/qlora-out");
  EXPECT_EQ(unmapped_keys(imported),
            (std::set<std::string>{"dataset_prepared_path", "optimizer", "flash_attention", "evals_per_epoch",
                                   "saves_per_epoch", "special_tokens"}));
  EXPECT_CONTAINS(reason_of(imported, "optimizer"), "offload.optimizer_state int8");
  // In the order of the file.
  EXPECT_EQ(imported.unmapped.front().key, "dataset_prepared_path");
  EXPECT_EQ(imported.unmapped.back().key, "special_tokens");
}

TEST(ConfigImport, LlamaFactoryTakesTheStageFromTheFile) {
  const ImportedConfig imported = import_foreign_config_file(ForeignTool::llamafactory, kData + "llamafactory_dpo.yaml");
  const Config c = parse_config(imported.yaml, "imported");
  EXPECT_EQ(imported.stage, Stage::dpo);
  EXPECT_EQ(c.stage, Stage::dpo);
  EXPECT_EQ(c.model.path, "meta-llama/Meta-Llama-3-8B-Instruct");
  EXPECT_EQ(c.lora.rank, 8);
  EXPECT_DOUBLE_EQ(c.lora.alpha, 16.0);  // lora_alpha unset: lora_rank x 2
  EXPECT_EQ(c.lora.target_modules, kAllLinear);  // lora_target: all
  EXPECT_DOUBLE_EQ(c.dpo.beta, 0.1);
  EXPECT_EQ(c.dpo.loss_type, std::vector<DpoLoss>{DpoLoss::sigmoid});
  EXPECT_EQ(c.tokenizer.chat_template, "llama3");
  EXPECT_EQ(c.data.max_length, 2048);
  EXPECT_EQ(c.data.max_samples, 1000);
  EXPECT_TRUE(c.data.train_file.empty());  // a dataset_info.json name
  EXPECT_EQ(c.train.micro_batch_size, 1);
  EXPECT_EQ(c.train.grad_accumulation, 8);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 5e-6);
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.lr_scheduler, LrSchedule::cosine);
  EXPECT_EQ(c.train.precision, Precision::bf16);
  EXPECT_TRUE(c.train.gradient_checkpointing);  // disable_gradient_checkpointing defaults to false
  EXPECT_EQ(c.train.save_every, 500);
  EXPECT_EQ(c.logging.log_every, 10);
  EXPECT_EQ(c.output.dir, "saves/llama3-8b/lora/dpo");
  EXPECT_EQ(unmapped_keys(imported),
            (std::set<std::string>{"trust_remote_code", "dataset", "overwrite_cache", "preprocessing_num_workers",
                                   "dataloader_num_workers", "plot_loss", "overwrite_output_dir", "save_only_model",
                                   "warmup_ratio"}));
  EXPECT_CONTAINS(reason_of(imported, "dataset"), "dataset_info.json");
}

TEST(ConfigImport, StageFromAxolotlRlAndLlamaFactoryPpo) {
  const ImportedConfig dpo = import_foreign_config(
      ForeignTool::axolotl, "base_model: m\nrl: orpo\norpo_alpha: 0.2\nlearning_rate: 8e-6\n", "a.yaml");
  const Config c = parse_config(dpo.yaml, "imported");
  EXPECT_EQ(c.stage, Stage::dpo);
  EXPECT_EQ(c.dpo.loss_type, std::vector<DpoLoss>{DpoLoss::orpo});
  EXPECT_DOUBLE_EQ(c.dpo.beta, 0.2);
  EXPECT_EQ(c.train.micro_batch_size, 1);  // Axolotl's default micro_batch_size

  const ImportedConfig grpo = import_foreign_config(
      ForeignTool::axolotl,
      "base_model: m\nrl: grpo\nmicro_batch_size: 4\ngradient_accumulation_steps: 2\nmax_steps: 30\n"
      "trl:\n  num_generations: 4\n  beta: 0.001\n  max_completion_length: 64\n  use_vllm: true\n",
      "g.yaml");
  const Config g = parse_config(grpo.yaml, "imported");
  EXPECT_EQ(g.grpo.generation_batch_size, 8);
  EXPECT_EQ(g.train.max_steps, 30);  // one optimizer step per rollout of 8
  EXPECT_DOUBLE_EQ(g.grpo.beta, 0.001);
  EXPECT_EQ(g.generation.max_new_tokens, 64);
  EXPECT_EQ(unmapped_keys(grpo), std::set<std::string>{"trl.use_vllm"});

  const ImportedConfig ppo = import_foreign_config(
      ForeignTool::llamafactory,
      "stage: ppo\nmodel_name_or_path: m\nreward_model: rm\nreward_model_type: full\n"
      "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\nfinetuning_type: full\n",
      "p.yaml");
  const Config p = parse_config(ppo.yaml, "imported");
  EXPECT_EQ(p.stage, Stage::ppo);
  EXPECT_EQ(p.ppo.reward_model, "rm");
  EXPECT_EQ(p.ppo.rollout_batch_size, 8);
  EXPECT_EQ(p.ppo.ppo_epochs, 4);
  EXPECT_EQ(p.lora.rank, 0);
  EXPECT_DOUBLE_EQ(p.generation.top_p, 0.7);  // LLaMA-Factory's generating defaults
}

TEST(ConfigImport, ErrorsNameTheFile) {
  EXPECT_CONTAINS(config_error([] { foreign_tool_from_name("unsloth", "x.yaml"); }), "x.yaml");
  EXPECT_CONTAINS(config_error([] { foreign_tool_from_name("unsloth", "x.yaml"); }), "trl, axolotl or llamafactory");
  EXPECT_CONTAINS(config_error([] { import_foreign_config_file(ForeignTool::trl, kData + "absent.yaml", Stage::sft); }),
                  "absent.yaml");
  const std::string list = config_error([] { import_foreign_config(ForeignTool::trl, "- a\n- b\n", "l.yaml", Stage::sft); });
  EXPECT_CONTAINS(list, "l.yaml");
  EXPECT_CONTAINS(list, "mapping");
  const std::string no_stage = config_error([] { import_foreign_config(ForeignTool::trl, "seed: 1\n", "s.yaml"); });
  EXPECT_CONTAINS(no_stage, "s.yaml");
  EXPECT_CONTAINS(no_stage, "--stage");
  EXPECT_CONTAINS(config_error([] {
                    import_foreign_config(ForeignTool::llamafactory, "stage: sft\n", "d.yaml", Stage::dpo);
                  }),
                  "disagrees");
  const std::string type = config_error([] {
    import_foreign_config(ForeignTool::trl, "model_name_or_path: m\n\nlearning_rate: fast\n", "t.yaml", Stage::sft);
  });
  EXPECT_CONTAINS(type, "t.yaml:3");
  EXPECT_CONTAINS(type, "learning_rate");
  // A value Ferry's checks refuse (GRPO's generation batch must hold whole groups).
  EXPECT_CONTAINS(config_error([] {
                    import_foreign_config(ForeignTool::trl, "per_device_train_batch_size: 3\nnum_generations: 2\n",
                                          "b.yaml", Stage::grpo);
                  }),
                  "b.yaml: the Ferry config made from it does not load");
}

}  // namespace
}  // namespace ferry
