// Every family description (src/model/family/) against the model built from it: the tensors the
// description lists (names, shapes, order within a layer) are exactly the parameters the decoder
// block registers, so the chunk layout, the weight checks and GGUF import all see the model that
// runs; and each family's config.json survives a write and a read with every switch it sets.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <cmath>
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
  // A Mixture of Experts adds its router (`gate`); Mixtral names its experts' projections w1/w3/w2.
  const bool mixtral = config.moe.naming == ExpertNaming::mixtral;
  const std::vector<std::string> expected =
      config.fused_projections ? std::vector<std::string>{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
      : mixtral                ? std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate", "w1", "w3", "w2"}
      : config.has_experts()
          ? std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate", "gate_proj", "up_proj", "down_proj"}
          : std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  EXPECT_EQ(lora_targets(config), expected);
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
  EXPECT_EQ(back.fused_projections, config.fused_projections);
  EXPECT_EQ(back.partial_rotary_factor, config.partial_rotary_factor);
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

// Phi-3 shaped as Phi-4-mini: LongRoPE, partial rotary, original context at the top level.
std::string phi3_longrope_config(const std::string& factors = "[1.0, 1.5]") {
  return tiny_config("phi3", R"("partial_rotary_factor": 0.5, "max_position_embeddings": 64,
      "original_max_position_embeddings": 16,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.1], "long_factor": )" + factors + "}");
}

TEST(FamilySwitches, Phi3FusesItsProjectionsAndReadsLongRope) {
  const ModelShape phi3 = io::parse_hf_config(phi3_longrope_config(), "config.json");
  EXPECT_TRUE(phi3.fused_projections);
  EXPECT_EQ(phi3.rotary_dim(), 4);
  EXPECT_EQ(phi3.rope_scaling.type, RopeScalingType::longrope);
  EXPECT_EQ(phi3.rope_scaling.original_max_position_embeddings, 16);
  EXPECT_EQ(phi3.rope_scaling.long_factor, (std::vector<double>{1.0, 1.5}));
  // transformers: factor = 64 / 16 = 4, attention factor sqrt(1 + ln 4 / ln 16) = sqrt(1.5)
  EXPECT_NEAR(phi3.rope_attention_scaling(), std::sqrt(1.5), 1e-12);
  const ModelShape back = io::parse_hf_config(io::format_hf_config(phi3), "written");
  EXPECT_EQ(back.rope_scaling.short_factor, phi3.rope_scaling.short_factor);
  EXPECT_EQ(back.rope_scaling.long_factor, phi3.rope_scaling.long_factor);
  EXPECT_EQ(back.rope_scaling.original_max_position_embeddings, 16);
  EXPECT_EQ(back.rope_attention_scaling(), phi3.rope_attention_scaling());
  // The fused layer: qkv rows = (4 + 2 x 2) heads x 8, gate_up rows = 2 x 48.
  for (const ModelTensor& t : layer_tensors(phi3, 0)) {
    if (t.suffix == "self_attn.qkv_proj.weight") EXPECT_EQ(t.shape, (std::vector<int64_t>{64, 32}));
    if (t.suffix == "mlp.gate_up_proj.weight") EXPECT_EQ(t.shape, (std::vector<int64_t>{96, 32}));
  }
}

TEST(FamilyErrors, LongRopeFactorsOfTheWrongLengthNameTheKey) {
  try {
    io::parse_hf_config(phi3_longrope_config("[1.0, 1.5, 2.0]"), "config.json");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("rope_scaling.long_factor' has 3 values"), std::string::npos) << text;
    EXPECT_NE(text.find("needs 2"), std::string::npos) << text;
  }
  EXPECT_THROW(io::parse_hf_config(phi3_longrope_config("\"x\""), "config.json"), ConfigError);
}

TEST(LoraTargets, FusedModelsMapSeparateNamesAndOthersRefuseFusedOnes) {
  const ModelShape phi3 = io::parse_hf_config(tiny_config("phi3"), "config.json");
  EXPECT_EQ(resolve_lora_targets(phi3, {"q_proj", "k_proj", "v_proj", "o_proj"}),
            (std::vector<std::string>{"qkv_proj", "o_proj"}));
  EXPECT_EQ(resolve_lora_targets(phi3, {"down_proj", "up_proj", "qkv_proj"}),
            (std::vector<std::string>{"qkv_proj", "gate_up_proj", "down_proj"}));
  const ModelShape llama = io::parse_hf_config(tiny_config("llama"), "config.json");
  EXPECT_EQ(resolve_lora_targets(llama, {"v_proj", "q_proj"}), (std::vector<std::string>{"q_proj", "v_proj"}));
  try {
    resolve_lora_targets(llama, {"qkv_proj"});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("no projection 'qkv_proj'"), std::string::npos) << text;
    EXPECT_NE(text.find("q_proj, k_proj"), std::string::npos) << text;
  }
  EXPECT_TRUE(is_query_projection("model.layers.3.self_attn.qkv_proj.weight"));
  EXPECT_TRUE(is_query_projection("model.layers.3.self_attn.q_proj.weight"));
  EXPECT_FALSE(is_query_projection("model.layers.3.self_attn.k_proj.weight"));
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
