// `ferry config import --from trl` against TRL 1.16 itself: tests/parity/config_import_trl_ref.py
// parses tests/data/config_import/trl_{sft,dpo,grpo}.yaml with TRL's own TrlParser (its defaults
// filled in) and writes the values in the units Ferry counts them; the imported Ferry config, read
// back by Ferry's parser, must hold the same values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "core/config/config_import.h"
#include "core/config/config_io.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_FIXTURES_DIR) + "/config_import_trl/";
const std::string kData = std::string(FERRY_SOURCE_DIR) + "/tests/data/config_import/";

nlohmann::json reference(const std::string& stage) {
  std::ifstream in(kFixtures + "resolved.json");
  EXPECT_TRUE(in.good()) << "run the parity_fixture_config_import_trl test first";
  return nlohmann::json::parse(in).at(stage);
}

Config imported(const std::string& file, Stage stage) {
  return parse_config(import_foreign_config_file(ForeignTool::trl, kData + file, stage).yaml, file);
}

std::string schedule(LrSchedule s) { return std::string(enum_name(s)); }

// The keys every stage shares.
void expect_common(const Config& c, const nlohmann::json& trl) {
  EXPECT_DOUBLE_EQ(c.train.learning_rate, trl.at("learning_rate").get<double>());
  EXPECT_EQ(c.train.micro_batch_size, trl.at("per_device_train_batch_size").get<int64_t>());
  EXPECT_EQ(c.train.grad_accumulation, trl.at("gradient_accumulation_steps").get<int64_t>());
  EXPECT_EQ(c.train.seed, trl.at("seed").get<int64_t>());
  EXPECT_EQ(c.train.precision == Precision::bf16, trl.at("bf16").get<bool>());
  EXPECT_EQ(c.train.gradient_checkpointing, trl.at("gradient_checkpointing").get<bool>());
  EXPECT_EQ(c.output.dir, trl.at("output_dir").get<std::string>());
  EXPECT_EQ(c.lora.rank, trl.at("use_peft").get<bool>() ? trl.at("lora_r").get<int64_t>() : 0);
  EXPECT_DOUBLE_EQ(c.lora.alpha, trl.at("lora_alpha").get<double>());
  EXPECT_DOUBLE_EQ(c.lora.dropout, trl.at("lora_dropout_effective").get<double>());
  if (trl.at("lora_target_modules").is_array()) {
    EXPECT_EQ(c.lora.target_modules, trl.at("lora_target_modules").get<std::vector<std::string>>());
  }
  if (trl.contains("warmup_steps_resolved")) {
    EXPECT_EQ(c.train.warmup_steps, trl.at("warmup_steps_resolved").get<int64_t>());
  }
}

TEST(ConfigImportTrlParity, Sft) {
  const nlohmann::json trl = reference("sft");
  const Config c = imported("trl_sft.yaml", Stage::sft);
  expect_common(c, trl);
  EXPECT_EQ(c.train.epochs, trl.at("num_train_epochs").get<int64_t>());
  EXPECT_EQ(c.train.max_steps, -1);
  EXPECT_EQ(trl.at("lr_scheduler_type").get<std::string>(), "cosine_with_min_lr");
  EXPECT_EQ(schedule(c.train.lr_scheduler), "cosine");
  EXPECT_EQ(c.data.max_length, trl.at("max_length").get<int64_t>());
  EXPECT_EQ(c.data.packing, trl.at("packing").get<bool>());
  EXPECT_EQ(c.data.train_file, "hf:" + trl.at("dataset_name").get<std::string>());
  EXPECT_EQ(trl.at("lora_target_modules").get<std::string>(), "all-linear");
  EXPECT_EQ(c.lora.target_modules.size(), 7u);
}

TEST(ConfigImportTrlParity, Dpo) {
  const nlohmann::json trl = reference("dpo");
  const Config c = imported("trl_dpo.yaml", Stage::dpo);
  expect_common(c, trl);
  EXPECT_EQ(schedule(c.train.lr_scheduler), trl.at("lr_scheduler_type").get<std::string>());
  EXPECT_EQ(c.train.max_steps, trl.at("max_steps").get<int64_t>());  // optimizer steps on both sides
  EXPECT_EQ(c.data.max_length, trl.at("max_length").get<int64_t>());
  EXPECT_DOUBLE_EQ(c.dpo.beta, trl.at("beta").get<double>());
  ASSERT_EQ(c.dpo.loss_type.size(), trl.at("loss_type").size());
  for (size_t i = 0; i < c.dpo.loss_type.size(); ++i) {
    EXPECT_EQ(enum_name(c.dpo.loss_type[i]), trl.at("loss_type")[i].get<std::string>());
  }
  EXPECT_EQ(c.dpo.loss_weights, trl.at("loss_weights").get<std::vector<double>>());
}

TEST(ConfigImportTrlParity, GrpoRollouts) {
  const nlohmann::json trl = reference("grpo");
  const Config c = imported("trl_grpo.yaml", Stage::grpo);
  expect_common(c, trl);
  EXPECT_EQ(schedule(c.train.lr_scheduler), trl.at("lr_scheduler_type").get<std::string>());
  EXPECT_EQ(c.grpo.generation_batch_size, trl.at("generation_batch_size").get<int64_t>());
  EXPECT_EQ(c.grpo.num_generations, trl.at("num_generations").get<int64_t>());
  EXPECT_EQ(c.grpo.num_iterations, trl.at("num_iterations").get<int64_t>());
  EXPECT_EQ(c.train.max_steps, trl.at("rollouts").get<int64_t>());
  EXPECT_EQ(c.train.save_every, trl.at("save_rollouts").get<int64_t>());
  // Ferry's learner takes num_iterations x generation batch / (micro x accumulation) optimizer steps
  // per rollout: TRL's optimizer steps per generation.
  const double ferry_steps_per_rollout =
      static_cast<double>(c.grpo.num_iterations * c.grpo.generation_batch_size) /
      static_cast<double>(c.train.micro_batch_size * c.train.grad_accumulation);
  EXPECT_DOUBLE_EQ(ferry_steps_per_rollout, trl.at("optimizer_steps_per_generation").get<double>());
  EXPECT_EQ(c.generation.max_new_tokens, trl.at("max_completion_length").get<int64_t>());
  EXPECT_DOUBLE_EQ(c.grpo.beta, trl.at("beta").get<double>());
  EXPECT_EQ(enum_name(c.grpo.loss_type), trl.at("loss_type").get<std::string>());
  EXPECT_EQ(enum_name(c.grpo.scale_rewards), trl.at("scale_rewards").get<std::string>());
  EXPECT_EQ(c.data.prompt_file, "hf:" + trl.at("dataset_name").get<std::string>());
}

}  // namespace
}  // namespace ferry
