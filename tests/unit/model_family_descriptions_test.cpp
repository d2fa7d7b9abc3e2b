// Every family description (src/model/family/) against the model built from it: the tensors the
// description lists (names, shapes, order within a layer) are exactly the parameters the decoder
// block registers, so the chunk layout, the weight checks and GGUF import all see the model that
// runs; and each family's config.json survives a write and a read with every switch it sets.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <map>
#include <string>

#include "core/error.h"
#include "src/io/hf_config.h"
#include "src/model/family/model_family.h"
#include "src/model/family/model_tensors.h"
#include "src/model/model_heads.h"

namespace ferry {
namespace {

// A tiny config.json of `model_type` (3 layers, hidden 32), with extra keys.
std::string tiny_config(const std::string& model_type, const std::string& extra = "") {
  return R"({"model_type": ")" + model_type + R"(", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48,
             "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

std::vector<std::string> every_model_type() {
  std::vector<std::string> out;
  for (const ModelFamily* family : model_families()) out.push_back(family->model_types.front());
  return out;
}

class FamilyDescription : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyDescription, ListsExactlyTheParametersTheBlockRegisters) {
  const ModelShape config = io::parse_hf_config(tiny_config(GetParam()), "config.json");
  CausalLM model(config);
  std::map<std::string, std::vector<int64_t>> built;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) built[item.key()] = item.value().sizes().vec();
  std::map<std::string, std::vector<int64_t>> described;
  for (const ModelTensor& t : model_tensors(config)) described[t.name] = t.shape;
  EXPECT_EQ(built, described);
  int64_t count = 0;
  for (const auto& [name, shape] : built) count += c10::multiply_integers(shape);
  EXPECT_EQ(count, parameter_count(config));
}

TEST_P(FamilyDescription, GroupsAreInExecutionOrderAndLoraTargetsAreProjections) {
  const ModelShape config = io::parse_hf_config(tiny_config(GetParam()), "config.json");
  int64_t previous = 0;
  for (const ModelTensor& t : model_tensors(config)) {
    EXPECT_GE(t.group, previous) << t.name;
    previous = t.group;
    if (!t.lora_target.empty()) EXPECT_NE(t.name.find("." + t.lora_target + ".weight"), std::string::npos) << t.name;
    EXPECT_FALSE(t.gguf_name.empty()) << t.name;
  }
  EXPECT_EQ(lora_targets(config),
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}));
}

TEST_P(FamilyDescription, ConfigJsonRoundTripKeepsEverySwitch) {
  const ModelShape config = io::parse_hf_config(tiny_config(GetParam()), "config.json");
  const ModelShape back = io::parse_hf_config(io::format_hf_config(config), "written");
  EXPECT_EQ(back.model_type, config.model_type);
  EXPECT_EQ(back.norm_placement, config.norm_placement);
  EXPECT_EQ(back.norm_weight, config.norm_weight);
  EXPECT_EQ(back.qk_norm, config.qk_norm);
  EXPECT_EQ(back.mlp_activation, config.mlp_activation);
  EXPECT_EQ(back.scale_embeddings, config.scale_embeddings);
  EXPECT_EQ(back.query_pre_attn_scalar, config.query_pre_attn_scalar);
  EXPECT_EQ(back.attn_logit_softcapping, config.attn_logit_softcapping);
  EXPECT_EQ(back.final_logit_softcapping, config.final_logit_softcapping);
  EXPECT_EQ(back.sliding_window, config.sliding_window);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    EXPECT_EQ(back.layer_slides(i), config.layer_slides(i)) << "layer " << i;
    EXPECT_EQ(back.layer_rotates(i), config.layer_rotates(i)) << "layer " << i;
  }
  EXPECT_EQ(back.rope_theta, config.rope_theta);
  EXPECT_EQ(back.sliding_rope_theta, config.sliding_rope_theta);
  EXPECT_EQ(back.tie_word_embeddings, config.tie_word_embeddings);
  EXPECT_EQ(back.bos_token_id, config.bos_token_id);
  EXPECT_EQ(back.eos_token_ids, config.eos_token_ids);
  EXPECT_EQ(back.pad_token_id, config.pad_token_id);
  EXPECT_EQ(parameter_count(back), parameter_count(config));
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyDescription, ::testing::ValuesIn(every_model_type()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(FamilySwitches, FamiliesSetWhatTransformersDoes) {
  const ModelShape gemma3 = io::parse_hf_config(tiny_config("gemma3_text"), "config.json");
  EXPECT_EQ(gemma3.norm_placement, NormPlacement::sandwich);
  EXPECT_EQ(gemma3.norm_weight, NormWeight::one_plus);
  EXPECT_EQ(gemma3.qk_norm, QkNorm::per_head);
  EXPECT_TRUE(gemma3.scale_embeddings);
  EXPECT_EQ(gemma3.sliding_rope_theta, 10000.0);
  EXPECT_EQ(gemma3.rope_theta, 1000000.0);
  // Gemma3TextConfig: every 6th layer global; 3 layers -> all sliding.
  EXPECT_TRUE(gemma3.layer_slides(0) && gemma3.layer_slides(2));
  const ModelShape gemma2 = io::parse_hf_config(tiny_config("gemma2"), "config.json");
  EXPECT_EQ(gemma2.attn_logit_softcapping, 50.0);
  EXPECT_EQ(gemma2.final_logit_softcapping, 30.0);
  EXPECT_TRUE(gemma2.layer_slides(0));
  EXPECT_FALSE(gemma2.layer_slides(1));
  const ModelShape smollm3 = io::parse_hf_config(tiny_config("smollm3", R"("no_rope_layer_interval": 3)"), "c");
  EXPECT_TRUE(smollm3.layer_rotates(0));
  EXPECT_FALSE(smollm3.layer_rotates(2));
  const ModelShape olmo2 = io::parse_hf_config(tiny_config("olmo2"), "config.json");
  EXPECT_EQ(olmo2.norm_placement, NormPlacement::post);
  EXPECT_EQ(olmo2.qk_norm, QkNorm::whole);
  const ModelShape olmo3 = io::parse_hf_config(tiny_config("olmo3", R"("sliding_window": 16)"), "config.json");
  EXPECT_TRUE(olmo3.layer_slides(0));
  EXPECT_TRUE(olmo3.layer_slides(2));
}

TEST(FamilyErrors, AnUnknownModelTypeListsTheFamilies) {
  try {
    io::parse_hf_config(tiny_config("gpt_neox"), "config.json");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("'model_type' is 'gpt_neox'"), std::string::npos) << text;
    EXPECT_NE(text.find("gemma3_text"), std::string::npos) << text;
    EXPECT_NE(text.find("olmo2"), std::string::npos) << text;
  }
}

TEST(FamilyErrors, ABadLayerTypeNamesTheKey) {
  EXPECT_THROW(io::parse_hf_config(tiny_config("gemma3_text", R"("layer_types": ["sliding_attention"])"), "c"),
               ConfigError);
  try {
    io::parse_hf_config(
        tiny_config("olmo3", R"("layer_types": ["sliding_attention", "linear_attention", "full_attention"])"), "c");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'layer_types' holds \"linear_attention\""), std::string::npos) << e.what();
  }
}

TEST(FamilyErrors, AConfigAFamilyCannotExpressIsRefusedOnWrite) {
  ModelShape config = io::parse_hf_config(tiny_config("llama"), "config.json");
  config.norm_placement = NormPlacement::post;
  EXPECT_THROW(io::format_hf_config(config), UserError);
}

}  // namespace
}  // namespace ferry
