// Config parsing: defaults, YAML and JSON files, overrides, and every error path with the
// information its message must carry (file, line, key path, suggestion, expected type).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config/config_io.h"
#include "core/error.h"
#include "tests/support/scratch_dir.h"

namespace ferry {
namespace {

// Runs `fn`, expects a ConfigError, and returns its message.
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

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_config_test");
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Config, DefaultsWhenEmpty) {
  const Config c = parse_config("", "empty.yaml");
  EXPECT_EQ(c.stage, Stage::any);
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 2e-5);
  EXPECT_EQ(c.train.precision, Precision::fp32);
  EXPECT_EQ(c.offload.policy, OffloadPolicy::none);
  EXPECT_EQ(c.offload.gpu_memory.bytes, 0u);
  EXPECT_EQ(c.output.dir, "runs/ferry");
  EXPECT_EQ(c.lora.target_modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}));
}

TEST(Config, ReadsYamlValuesOfEveryType) {
  const Config c = parse_config(R"(
stage: sft
model:
  config: configs/demo-model.json
train:
  learning_rate: 3e-4
  max_steps: 200
  precision: bf16
  gradient_checkpointing: true
lora:
  rank: 8
  target_modules: [q_proj, v_proj]
offload:
  policy: optimizer
  gpu_memory: 8GiB
)",
                                "x.yaml");
  EXPECT_EQ(c.stage, Stage::sft);
  EXPECT_EQ(c.model.config, "configs/demo-model.json");
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 3e-4);
  EXPECT_EQ(c.train.max_steps, 200);
  EXPECT_EQ(c.train.precision, Precision::bf16);
  EXPECT_TRUE(c.train.gradient_checkpointing);
  EXPECT_EQ(c.lora.rank, 8);
  EXPECT_EQ(c.lora.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(c.offload.policy, OffloadPolicy::optimizer);
  EXPECT_EQ(c.offload.gpu_memory.bytes, 8ull << 30);
  EXPECT_DOUBLE_EQ(c.train.adam_beta1, 0.9);  // untouched keys keep defaults
}

TEST(Config, ReadsJsonWithLineNumbers) {
  const Config c = parse_config(R"({"train": {"micro_batch_size": 2, "precision": "fp16"}, "output": {"dir": "o"}})",
                                "x.json");
  EXPECT_EQ(c.train.micro_batch_size, 2);
  EXPECT_EQ(c.train.precision, Precision::fp16);
  EXPECT_EQ(c.output.dir, "o");
  const std::string msg = config_error([] { parse_config("{\n  \"train\": {\n    \"lerning_rate\": 1\n  }\n}", "x.json"); });
  EXPECT_CONTAINS(msg, "x.json:3");
  EXPECT_CONTAINS(msg, "unknown key 'train.lerning_rate'");
  EXPECT_CONTAINS(msg, "did you mean 'train.learning_rate'");
}

TEST(Config, UnknownKeyNamesFileLineAndSuggestion) {
  const std::string msg = config_error([] { parse_config("train:\n  seed: 1\n  lerning_rate: 0.1\n", "cfg.yaml"); });
  EXPECT_CONTAINS(msg, "cfg.yaml:3");
  EXPECT_CONTAINS(msg, "'train.lerning_rate'");
  EXPECT_CONTAINS(msg, "did you mean 'train.learning_rate'?");
}

TEST(Config, UnknownSectionSuggestsSection) {
  const std::string msg = config_error([] { parse_config("trian:\n  seed: 1\n", "cfg.yaml"); });
  EXPECT_CONTAINS(msg, "cfg.yaml:1");
  EXPECT_CONTAINS(msg, "unknown key 'trian'");
  EXPECT_CONTAINS(msg, "did you mean 'train'?");
}

TEST(Config, KeyInWrongSectionPointsToTheRightOne) {
  const std::string msg = config_error([] { parse_config("train:\n  packing: true\n", "cfg.yaml"); });
  EXPECT_CONTAINS(msg, "did you mean 'data.packing'?");
}

TEST(Config, UnrelatedKeyListsValidKeys) {
  const std::string msg = config_error([] { parse_config("output:\n  zzzzzzzz: 1\n", "cfg.yaml"); });
  EXPECT_CONTAINS(msg, "valid keys here: dir, keep_last");
}

TEST(Config, TypeErrorsNameKeyAndExpectedType) {
  struct Case {
    std::string text, key, expected;
  };
  const std::vector<Case> cases{
      {"train:\n  learning_rate: fast\n", "train.learning_rate", "expected a number, got 'fast'"},
      {"train:\n  max_steps: 1.5\n", "train.max_steps", "expected an integer, got '1.5'"},
      {"train:\n  gradient_checkpointing: maybe\n", "train.gradient_checkpointing", "expected true or false"},
      {"train:\n  precision: fp8\n", "train.precision", "expected one of fp32, bf16, fp16, got 'fp8'"},
      {"offload:\n  gpu_memory: lots\n", "offload.gpu_memory", "expected a memory size"},
      {"lora:\n  target_modules: q_proj\n", "lora.target_modules", "expected a list of strings"},
      {"lora:\n  target_modules: [[a]]\n", "lora.target_modules", "expected a list of strings"},
      {"model:\n  path: [a, b]\n", "model.path", "expected a string, got a list"},
      {"train: 5\n", "train", "expected a mapping of keys"},
  };
  for (const auto& c : cases) {
    const std::string msg = config_error([&] { parse_config(c.text, "t.yaml"); });
    EXPECT_CONTAINS(msg, "t.yaml:");
    EXPECT_CONTAINS(msg, c.key);
    EXPECT_CONTAINS(msg, c.expected);
  }
}

TEST(Config, EnumTypoGetsSuggestion) {
  const std::string msg = config_error([] { parse_config("offload:\n  policy: optimiser\n", "t.yaml"); });
  EXPECT_CONTAINS(msg, "did you mean 'optimizer'?");
}

TEST(Config, SyntaxErrorHasLineAndColumn) {
  const std::string msg = config_error([] { parse_config("train:\n  seed: [1, 2\n", "bad.yaml"); });
  EXPECT_CONTAINS(msg, "bad.yaml:");
  EXPECT_CONTAINS(msg, "syntax error");
}

TEST(Config, TopLevelMustBeMapping) {
  const std::string msg = config_error([] { parse_config("- a\n- b\n", "list.yaml"); });
  EXPECT_CONTAINS(msg, "must be a mapping");
}

TEST(Config, OverridesSetScalarsListsAndSizes) {
  Config c;
  apply_override(c, "train.learning_rate=0.001");
  apply_override(c, "lora.target_modules=[gate_proj, up_proj]");
  apply_override(c, "offload.gpu_memory=512MiB");
  apply_override(c, "output.dir=runs/x=y");  // only the first '=' splits
  apply_override(c, "stage=rm");
  apply_override(c, "model.path=");
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 0.001);
  EXPECT_EQ(c.lora.target_modules, (std::vector<std::string>{"gate_proj", "up_proj"}));
  EXPECT_EQ(c.offload.gpu_memory.bytes, 512ull << 20);
  EXPECT_EQ(c.output.dir, "runs/x=y");
  EXPECT_EQ(c.stage, Stage::rm);
  EXPECT_EQ(c.model.path, "");
}

TEST(Config, OverrideErrorsNameTheFlag) {
  Config c;
  std::string msg = config_error([&] { apply_override(c, "train.lerning_rate=1"); });
  EXPECT_CONTAINS(msg, "--set train.lerning_rate=1");
  EXPECT_CONTAINS(msg, "did you mean 'train.learning_rate'?");
  msg = config_error([&] { apply_override(c, "train.learning_rate"); });
  EXPECT_CONTAINS(msg, "expected section.key=value");
  msg = config_error([&] { apply_override(c, "train.max_steps=ten"); });
  EXPECT_CONTAINS(msg, "train.max_steps: expected an integer, got 'ten'");
  msg = config_error([&] { apply_override(c, "train..seed=1"); });
  EXPECT_CONTAINS(msg, "empty key segment");
  msg = config_error([&] { apply_override(c, "train=1"); });
  EXPECT_CONTAINS(msg, "expected a mapping");
}

TEST(Config, LoadAppliesOverridesAfterFileThenValidates) {
  const auto path = write_temp("load.yaml", "train:\n  learning_rate: 0.5\n  seed: 7\n");
  const Config c = load_config(path, {"train.learning_rate=0.25"});
  EXPECT_DOUBLE_EQ(c.train.learning_rate, 0.25);
  EXPECT_EQ(c.train.seed, 7);
  const std::string msg = config_error([&] { load_config(path, {"train.micro_batch_size=0"}); });
  EXPECT_CONTAINS(msg, "train.micro_batch_size must be >= 1");
}

TEST(Config, MissingFileIsAConfigError) {
  const std::string msg = config_error([] { load_config("/nonexistent/ferry.yaml"); });
  EXPECT_CONTAINS(msg, "/nonexistent/ferry.yaml");
  EXPECT_CONTAINS(msg, "cannot be read");
}

TEST(Config, ValidationCatchesRanges) {
  struct Case {
    std::string override_, expected;
  };
  const std::vector<Case> cases{
      {"train.learning_rate=0", "train.learning_rate must be > 0"},
      {"train.grad_accumulation=0", "train.grad_accumulation must be >= 1"},
      {"train.max_steps=0", "train.max_steps must be -1"},
      {"train.adam_beta2=1", "train.adam_beta2 must be in [0, 1)"},
      {"data.eval_fraction=1.5", "data.eval_fraction must be in [0, 1)"},
      {"lora.target_modules=[q_proj, qkv]", "lora.target_modules: unknown module 'qkv'"},
      {"lora.rank=-1", "lora.rank must be >= 0"},
      {"lora.dropout=1", "lora.dropout must be in [0, 1)"},
      {"generation.top_p=0", "generation.top_p must be in (0, 1]"},
      {"generation.temperature=0", "generation.greedy"},
      {"output.dir=", "output.dir must not be empty"},
  };
  for (const auto& c : cases) {
    Config config;
    apply_override(config, c.override_);
    const std::string msg = config_error([&] { validate_config(config); });
    EXPECT_CONTAINS(msg, c.expected) << "for --set " << c.override_;
  }
}

TEST(Config, OverlapStepNeedsAnOffloadedOptimizerWithoutClippingOrFp16) {
  const auto error_for = [](const std::vector<std::string>& overrides) {
    Config config;
    for (const auto& o : overrides) apply_override(config, o);
    return config_error([&] { validate_config(config); });
  };
  EXPECT_CONTAINS(error_for({"offload.overlap_step=true", "offload.policy=optimizer"}), "train.max_grad_norm=0");
  EXPECT_CONTAINS(error_for({"offload.overlap_step=true", "train.max_grad_norm=0"}), "offload.policy");
  EXPECT_CONTAINS(error_for({"offload.overlap_step=true", "offload.policy=params", "train.max_grad_norm=0",
                             "train.precision=fp16"}),
                  "train.precision fp16");
  Config fine;
  for (const auto& o : {"offload.overlap_step=true", "offload.policy=auto", "train.max_grad_norm=0"}) {
    apply_override(fine, o);
  }
  EXPECT_NO_THROW(validate_config(fine));
}

TEST(Config, Int8MomentsNeedAnOffloadedOptimizerAndHostMemoryIsASize) {
  const auto error_for = [](const std::vector<std::string>& overrides) {
    Config config;
    for (const auto& o : overrides) apply_override(config, o);
    return config_error([&] { validate_config(config); });
  };
  EXPECT_CONTAINS(error_for({"offload.optimizer_state=int8"}), "offload.policy optimizer, params or auto");
  EXPECT_CONTAINS(config_error([] {
                    Config c;
                    apply_override(c, "offload.optimizer_state=int4");
                  }),
                  "fp32");
  Config fine;
  apply_override(fine, "offload.optimizer_state=int8");
  apply_override(fine, "offload.policy=params");
  apply_override(fine, "offload.host_memory=32GiB");
  EXPECT_NO_THROW(validate_config(fine));
  EXPECT_EQ(fine.offload.host_memory.bytes, 32ull << 30);
}

TEST(Config, Bf16KahanMasterWeightsNeedBf16AndAnOffloadedOptimizer) {
  const auto error_for = [](const std::vector<std::string>& overrides) {
    Config config;
    for (const auto& o : overrides) apply_override(config, o);
    return config_error([&] { validate_config(config); });
  };
  EXPECT_CONTAINS(error_for({"offload.master_weights=bf16_kahan", "train.precision=bf16"}),
                  "offload.policy optimizer, params or auto");
  EXPECT_CONTAINS(error_for({"offload.master_weights=bf16_kahan", "offload.policy=optimizer", "train.precision=fp16"}),
                  "train.precision bf16 (got fp16)");
  EXPECT_CONTAINS(config_error([] {
                    Config c;
                    apply_override(c, "offload.master_weights=bf16");
                  }),
                  "bf16_kahan");
  Config fine;
  apply_override(fine, "offload.master_weights=bf16_kahan");
  apply_override(fine, "offload.policy=params");
  apply_override(fine, "train.precision=bf16");
  EXPECT_NO_THROW(validate_config(fine));
  // bf16_stochastic: the same two needs.
  EXPECT_CONTAINS(error_for({"offload.master_weights=bf16_stochastic", "train.precision=bf16"}),
                  "offload.master_weights bf16_stochastic keeps the master weights on the host");
  EXPECT_CONTAINS(error_for({"offload.master_weights=bf16_stochastic", "offload.policy=params", "train.precision=fp32"}),
                  "rounded stochastically): it needs train.precision bf16 (got fp32)");
  apply_override(fine, "offload.master_weights=bf16_stochastic");
  EXPECT_NO_THROW(validate_config(fine));
}

TEST(Config, ActivationOffloadNeedsCheckpointedLayers) {
  const auto error_for = [](const std::vector<std::string>& overrides) {
    Config config;
    for (const auto& o : overrides) apply_override(config, o);
    return config_error([&] { validate_config(config); });
  };
  EXPECT_CONTAINS(error_for({"train.activation_offload=true"}), "train.gradient_checkpointing: true");
  EXPECT_CONTAINS(error_for({"train.activation_offload=true", "offload.policy=optimizer"}), "offload.policy optimizer");
  for (const auto& fine_with : {"train.gradient_checkpointing=true", "offload.policy=params", "offload.policy=auto"}) {
    Config fine;
    apply_override(fine, "train.activation_offload=true");
    apply_override(fine, fine_with);
    EXPECT_NO_THROW(validate_config(fine)) << fine_with;
  }
}

TEST(Config, YamlRoundTripKeepsEveryValue) {
  Config c;
  apply_override(c, "train.learning_rate=1.25e-4");
  apply_override(c, "train.precision=bf16");
  apply_override(c, "offload.gpu_memory=6GiB");
  apply_override(c, "lora.target_modules=[q_proj]");
  apply_override(c, "model.path=some dir/with: colon");
  apply_override(c, "generation.stop_strings=[\"</s>\", \"\\n\\n\"]");
  const std::string yaml = config_to_yaml(c);
  const Config back = parse_config(yaml, "roundtrip.yaml");
  EXPECT_DOUBLE_EQ(back.train.learning_rate, 1.25e-4);
  EXPECT_EQ(back.train.precision, Precision::bf16);
  EXPECT_EQ(back.offload.gpu_memory.bytes, 6ull << 30);
  EXPECT_EQ(back.lora.target_modules, std::vector<std::string>{"q_proj"});
  EXPECT_EQ(back.model.path, "some dir/with: colon");
  EXPECT_EQ(back.generation.stop_strings, (std::vector<std::string>{"</s>", "\n\n"}));
  EXPECT_EQ(config_to_yaml(back), yaml);
  // Every key appears in the output.
  for (const auto& key : config_key_paths()) {
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_CONTAINS(yaml, leaf + ":");
  }
}

TEST(Config, RewardsAreAListOfStrictMappings) {
  const Config c = parse_config(R"(
rewards:
  - kind: verifier
    match: numeric
  - {kind: model, path: runs/rm, weight: 0.5}
  - kind: command
    command: python3 judge.py
    timeout: 5
)", "r.yaml");
  ASSERT_EQ(c.rewards.size(), 3u);
  EXPECT_EQ(c.rewards[0].kind, RewardKind::verifier);
  EXPECT_EQ(c.rewards[0].match, AnswerMatch::numeric);
  EXPECT_DOUBLE_EQ(c.rewards[0].weight, 1.0);
  EXPECT_EQ(c.rewards[1].path, "runs/rm");
  EXPECT_DOUBLE_EQ(c.rewards[1].weight, 0.5);
  EXPECT_EQ(c.rewards[2].command, "python3 judge.py");
  EXPECT_NO_THROW(validate_config(c));
  // Printed and read back, the list is the same; --set replaces the whole list.
  const Config back = parse_config(config_to_yaml(c), "back.yaml");
  EXPECT_EQ(config_to_yaml(back), config_to_yaml(c));
  Config set = c;
  apply_override(set, "rewards=[{kind: verifier, match: contains}]");
  ASSERT_EQ(set.rewards.size(), 1u);
  EXPECT_EQ(set.rewards[0].match, AnswerMatch::contains);

  EXPECT_CONTAINS(config_error([] { parse_config("rewards:\n  - kind: verifier\n    wieght: 2\n", "w.yaml"); }),
                  "w.yaml:3: unknown key 'rewards[0].wieght' (did you mean 'rewards[0].weight'?)");
  EXPECT_CONTAINS(config_error([] { parse_config("rewards:\n  kind: verifier\n", "m.yaml"); }),
                  "rewards: expected a list of mappings");
  EXPECT_CONTAINS(config_error([] { parse_config("rewards: [{kind: judge}]\n", "k.yaml"); }),
                  "rewards[0].kind: expected one of verifier, model, command");
  const auto invalid = [](const std::string& text) {
    return config_error([&] { validate_config(parse_config(text, "v.yaml")); });
  };
  EXPECT_CONTAINS(invalid("rewards: [{kind: model}]"), "rewards[0].path: a model reward needs");
  EXPECT_CONTAINS(invalid("rewards: [{kind: verifier}, {kind: command}]"), "rewards[1].command: a command reward");
  EXPECT_CONTAINS(invalid("rewards: [{kind: command, command: x, timeout: 0}]"), "rewards[0].timeout must be > 0");
  EXPECT_CONTAINS(invalid("rewards: [{kind: verifier, path: x}]"), "rewards[0].path is for kind: model");
  EXPECT_CONTAINS(invalid("rewards: [{kind: model, path: a}, {kind: model, path: b}]"), "at most one reward of kind model");
}

TEST(Config, RlGroupSettingsAreChecked) {
  const auto error_for = [](const std::vector<std::string>& overrides) {
    Config config;
    for (const auto& o : overrides) apply_override(config, o);
    return config_error([&] { validate_config(config); });
  };
  EXPECT_CONTAINS(error_for({"grpo.generation_batch_size=20"}), "must be a multiple of grpo.num_generations (8)");
  EXPECT_CONTAINS(error_for({"grpo.num_generations=1"}), "grpo.num_generations must be >= 2");
  EXPECT_CONTAINS(error_for({"ppo.advantage_estimator=rloo"}), "set ppo.num_generations >= 2");
  Config fine;
  apply_override(fine, "ppo.advantage_estimator=reinforce_baseline");
  apply_override(fine, "ppo.num_generations=4");
  apply_override(fine, "grpo.loss_type=dr_grpo");
  EXPECT_NO_THROW(validate_config(fine));
}

TEST(Config, QuantizedBaseNeedsLoraUnderAnyPolicy) {
  Config c;
  EXPECT_EQ(c.lora.quantize_base, BaseQuantization::none);
  EXPECT_TRUE(c.lora.double_quant);
  apply_override(c, "lora.quantize_base=nf4");
  EXPECT_EQ(c.lora.quantize_base, BaseQuantization::nf4);
  const std::string no_rank = config_error([&] { validate_config(c); });
  EXPECT_CONTAINS(no_rank, "lora.quantize_base");
  EXPECT_CONTAINS(no_rank, "lora.rank");
  apply_override(c, "lora.rank=8");
  EXPECT_NO_THROW(validate_config(c));
  apply_override(c, "offload.policy=params");  // the engines page the quantised base like other weights
  EXPECT_NO_THROW(validate_config(c));
  // int8 follows the same rules; an unknown value names the ones there are.
  Config d;
  apply_override(d, "lora.quantize_base=int8");
  EXPECT_EQ(d.lora.quantize_base, BaseQuantization::int8);
  EXPECT_CONTAINS(config_error([&] { validate_config(d); }), "lora.rank");
  const std::string fp4 = config_error([&] { apply_override(d, "lora.quantize_base=fp4"); });
  EXPECT_CONTAINS(fp4, "lora.quantize_base");
  EXPECT_CONTAINS(fp4, "int8");
  EXPECT_CONTAINS(fp4, "gguf");
  // gguf keeps a GGUF model's own blocks: a model built from model.config has none.
  Config g;
  apply_override(g, "lora.quantize_base=gguf");
  apply_override(g, "lora.rank=8");
  EXPECT_EQ(g.lora.quantize_base, BaseQuantization::gguf);
  apply_override(g, "model.config=configs/demo-model.json");
  const std::string no_file = config_error([&] { validate_config(g); });
  EXPECT_CONTAINS(no_file, "lora.quantize_base gguf");
  EXPECT_CONTAINS(no_file, "model.path");
  apply_override(g, "model.config=");
  apply_override(g, "model.path=model.gguf");
  EXPECT_NO_THROW(validate_config(g));
}

TEST(Config, SavedConfigLoadsBack) {
  const auto dir = ferry::test_support::process_scratch_dir("ferry_config_save");
  std::filesystem::remove_all(dir);
  Config c;
  apply_override(c, "train.seed=1234");
  save_resolved_config(c, dir.string());
  EXPECT_EQ(load_config((dir / "config.yaml").string()).train.seed, 1234);
  // No temporary files are left behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(Config, ChatTemplateKwargsAreAFreeMappingKeptAsJson) {
  const Config c = parse_config("tokenizer:\n  chat_template_kwargs: {enable_thinking: false, n: 3, x: 0.5, s: \"3\", "
                                "t: text, l: [1, a], z: null}\n",
                                "k.yaml");
  EXPECT_EQ(c.tokenizer.chat_template_kwargs.json,
            R"({"enable_thinking":false,"l":[1,"a"],"n":3,"s":"3","t":"text","x":0.5,"z":null})");
  EXPECT_EQ(parse_config("", "empty.yaml").tokenizer.chat_template_kwargs.json, "{}");
  const std::string msg = config_error([] { parse_config("tokenizer:\n  chat_template_kwargs: 3\n", "k.yaml"); });
  EXPECT_NE(msg.find("k.yaml:2: tokenizer.chat_template_kwargs: expected a mapping"), std::string::npos) << msg;
  Config overridden;
  apply_override(overridden, "tokenizer.chat_template_kwargs={enable_thinking: true}");
  EXPECT_EQ(overridden.tokenizer.chat_template_kwargs.json, R"({"enable_thinking":true})");
}

}  // namespace
}  // namespace ferry
