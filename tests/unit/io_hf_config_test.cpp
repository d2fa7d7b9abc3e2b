// config.json reading: every accepted rope form, GQA, the families (qwen2 biases, qwen3 q/k norms
// and head_dim, mistral's sliding window), defaults, and a ConfigError naming the key for each bad
// or unsupported value. (Agreement with transformers itself is
// checked by tests/parity/io_safetensors_parity_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "src/io/hf_config.h"

namespace ferry::io {
namespace {

const std::string kBase = R"("vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
                             "num_hidden_layers": 2, "num_attention_heads": 4)";

ModelShape parse(const std::string& extra) {
  return parse_hf_config("{" + kBase + (extra.empty() ? "" : ", " + extra) + "}", "config.json");
}

std::string error_of(const std::string& extra) {
  try {
    parse(extra);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << extra;
  return "";
}

TEST(IoHfConfig, DefaultsFollowTransformers) {
  const ModelShape c = parse("");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.vocab_size, 128);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::none);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.pad_token_id, -1);
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(IoHfConfig, GqaHeadDimTokensAndFlags) {
  const ModelShape c = parse(R"("num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": true,
      "attention_bias": true, "mlp_bias": true, "bos_token_id": 5, "eos_token_id": [6, 7], "pad_token_id": 0,
      "torch_dtype": "bfloat16", "max_position_embeddings": 512, "rms_norm_eps": 1e-5)");
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_output_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, 5);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{6, 7}));
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(parse(R"("dtype": "float16", "torch_dtype": "float32")").torch_dtype, "float16");
  EXPECT_EQ(parse(R"("eos_token_id": 9, "pad_token_id": null, "bos_token_id": null)").eos_token_ids, std::vector<int64_t>{9});
  EXPECT_EQ(parse(R"("bos_token_id": null)").bos_token_id, -1);
  EXPECT_TRUE(parse(R"("eos_token_id": null)").eos_token_ids.empty());
}

TEST(IoHfConfig, LegacyRopeScalingLinear) {
  const ModelShape c = parse(R"("rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 2})");
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::linear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
  EXPECT_EQ(parse(R"("rope_scaling": null)").rope_scaling.type, RopeScalingType::none);
}

TEST(IoHfConfig, LegacyRopeScalingLlama3) {
  const ModelShape c = parse(R"("rope_theta": 500000, "max_position_embeddings": 131072, "rope_scaling": {
      "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192})");
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::llama3);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  // Without original_max_position_embeddings transformers uses max_position_embeddings.
  const ModelShape d = parse(R"("max_position_embeddings": 1024, "rope_scaling": {"rope_type": "llama3", "factor": 4,
      "low_freq_factor": 1, "high_freq_factor": 4})");
  EXPECT_EQ(d.rope_scaling.original_max_position_embeddings, 1024);
}

TEST(IoHfConfig, RopeParameters) {
  const ModelShape c = parse(R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 250000.0, "factor": 32.0,
      "low_freq_factor": 2.0, "high_freq_factor": 8.0, "original_max_position_embeddings": 4096})");
  EXPECT_DOUBLE_EQ(c.rope_theta, 250000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::llama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 2.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 8.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 4096);
  const ModelShape d = parse(R"("rope_parameters": {"rope_type": "default", "rope_theta": 1000.0})");
  EXPECT_DOUBLE_EQ(d.rope_theta, 1000.0);
  EXPECT_EQ(d.rope_scaling.type, RopeScalingType::none);
  // rope_parameters wins over the legacy keys.
  EXPECT_DOUBLE_EQ(parse(R"("rope_theta": 7.0, "rope_parameters": {"rope_type": "default", "rope_theta": 9.0})").rope_theta, 9.0);
  // ... and borrows rope_theta from the top level when it has none.
  EXPECT_DOUBLE_EQ(parse(R"("rope_theta": 7.0, "rope_parameters": {"rope_type": "default"})").rope_theta, 7.0);
}

TEST(IoHfConfig, Qwen2HasQkvBiasOnly) {
  const ModelShape c = parse(R"("model_type": "qwen2", "num_key_value_heads": 2, "use_sliding_window": false)");
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.max_position_embeddings, 32768);
}

// Qwen3Config: q/k norms on every layer, one attention_bias switch (q/k/v/o), no MLP bias, head_dim
// 128 when absent (not hidden / heads), no BOS/EOS defaults; layer_types of full attention only.
TEST(IoHfConfig, Qwen3HasQkNormsAndItsOwnHeadDim) {
  ModelShape c = parse(R"("model_type": "qwen3", "num_key_value_heads": 2, "head_dim": 32, "use_sliding_window": false,
      "sliding_window": null, "max_window_layers": 28, "layer_types": ["full_attention", "full_attention"])");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.qk_norm, QkNorm::per_head);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.bos_token_id, -1);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(parse(R"("model_type": "qwen3", "num_key_value_heads": 2)").head_dim, 128);
  // Qwen2Config / Qwen3Config: 32 KV heads when the key is absent, no grouping when it is null.
  EXPECT_EQ(parse(R"("model_type": "qwen3", "num_attention_heads": 64, "hidden_size": 4096)").num_key_value_heads, 32);
  EXPECT_EQ(parse(R"("model_type": "qwen2", "num_attention_heads": 64, "hidden_size": 4096)").num_key_value_heads, 32);
  EXPECT_EQ(parse(R"("model_type": "qwen3", "num_key_value_heads": null)").num_key_value_heads, 4);
  c = parse(R"("model_type": "qwen3", "num_key_value_heads": 2, "attention_bias": true, "mlp_bias": true)");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_output_bias);
  EXPECT_FALSE(c.mlp_bias);  // Qwen3MLP has no bias whatever the file says
  EXPECT_EQ(parse("").qk_norm, QkNorm::none);
  EXPECT_EQ(parse(R"("model_type": "qwen2", "num_key_value_heads": 2)").qk_norm, QkNorm::none);
}

// MistralConfig: no biases, max_position_embeddings 131072 and sliding_window 4096 when absent;
// null means full attention (Mistral 7B v0.2 and later).
TEST(IoHfConfig, MistralKeepsItsSlidingWindow) {
  ModelShape c = parse(R"("model_type": "mistral", "num_key_value_heads": 2, "sliding_window": 4096, "head_dim": 32,
      "attention_bias": true, "mlp_bias": true)");
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.qk_norm, QkNorm::none);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(parse(R"("model_type": "mistral", "num_key_value_heads": 2, "sliding_window": null)").sliding_window, 0);
  EXPECT_EQ(parse(R"("model_type": "mistral", "num_key_value_heads": 2)").sliding_window, 4096);
  EXPECT_EQ(parse(R"("model_type": "mistral", "num_attention_heads": 16, "hidden_size": 256)").num_key_value_heads, 8);
  EXPECT_EQ(parse(R"("model_type": "mistral", "num_key_value_heads": 2, "head_dim": null)").head_dim, 16);
  EXPECT_EQ(parse(R"("sliding_window": 8)").sliding_window, 0);  // ModelShape has none: ignored
  const std::string error = error_of(R"("model_type": "mistral", "num_key_value_heads": 2, "sliding_window": 0)");
  EXPECT_NE(error.find("'sliding_window' must be a positive"), std::string::npos) << error;
}

// What is not supported says what is, naming the key.
TEST(IoHfConfig, UnsupportedFamiliesListTheSupportedOnes) {
  std::string error = error_of(R"("model_type": "gpt_oss")");
  EXPECT_NE(error.find("config.json: 'model_type' is 'gpt_oss'"), std::string::npos) << error;
  EXPECT_NE(error.find("supported: llama, mistral, qwen2, qwen3"), std::string::npos) << error;
  error = error_of(R"("architectures": ["LlamaForTokenClassification"])");
  EXPECT_NE(error.find("'architectures' names LlamaForTokenClassification"), std::string::npos) << error;
  EXPECT_NE(error.find("Qwen3ForCausalLM"), std::string::npos) << error;
  EXPECT_NE(error_of(R"("architectures": "LlamaForCausalLM")").find("'architectures' must be a list"),
            std::string::npos);
  EXPECT_NO_THROW(parse(R"("model_type": "mistral", "num_key_value_heads": 2,
                           "architectures": ["MistralForCausalLM"])"));
  EXPECT_NO_THROW(
      parse(R"("model_type": "qwen3", "num_key_value_heads": 2, "architectures": ["Qwen3ForSequenceClassification"])"));
  error = error_of(R"("model_type": "qwen3", "num_key_value_heads": 2, "use_sliding_window": true)");
  EXPECT_NE(error.find("'use_sliding_window' is true"), std::string::npos) << error;
  error = error_of(R"("model_type": "qwen3", "num_key_value_heads": 2,
                      "layer_types": ["full_attention", "sliding_attention"])");
  EXPECT_NE(error.find("'layer_types' holds \"sliding_attention\""), std::string::npos) << error;
  error = error_of(R"("model_type": "qwen2", "num_key_value_heads": 2, "layer_types": "full_attention")");
  EXPECT_NE(error.find("'layer_types' must be a list"), std::string::npos) << error;
}

TEST(IoHfConfig, BadValuesNameTheKey) {
  EXPECT_NE(error_of(R"("model_type": "gpt2")").find("config.json: 'model_type' is 'gpt2'"), std::string::npos);
  EXPECT_NE(error_of(R"("rope_scaling": {"type": "ntk", "factor": 4})").find("'rope_scaling.type' is 'ntk'"), std::string::npos);
  EXPECT_NE(error_of(R"("rope_scaling": {"type": "yarn", "factor": -4})").find("'rope_scaling.factor'"), std::string::npos);
  EXPECT_NE(error_of(R"("rope_parameters": {"rope_type": "dynamic", "factor": 4})").find("'rope_parameters.rope_type' is 'dynamic'"),
            std::string::npos);
  EXPECT_NE(error_of(R"("rope_scaling": {"type": "linear"})").find("'rope_scaling.factor' is missing"), std::string::npos);
  EXPECT_NE(error_of(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1})")
                .find("high_freq_factor"),
            std::string::npos);
  EXPECT_NE(error_of(R"("rope_parameters": {"full_attention": {"rope_type": "default"}})").find("per-layer-type"),
            std::string::npos);
  EXPECT_NE(error_of(R"("num_key_value_heads": 3)").find("'num_key_value_heads' (3) must divide"), std::string::npos);
  EXPECT_NE(error_of(R"("head_dim": "16")").find("'head_dim' must be an integer"), std::string::npos);
  EXPECT_NE(error_of(R"("rope_theta": -1)").find("'rope_theta' must be a positive number"), std::string::npos);
  EXPECT_NE(error_of(R"("hidden_act": "gelu")").find("'hidden_act'"), std::string::npos);
  EXPECT_NE(error_of(R"("tie_word_embeddings": "yes")").find("'tie_word_embeddings' must be true or false"), std::string::npos);
  EXPECT_NE(error_of(R"("eos_token_id": [1, "x"])").find("'eos_token_id'"), std::string::npos);
  EXPECT_NE(error_of(R"("torch_dtype": "int8")").find("'torch_dtype' is 'int8'"), std::string::npos);
  EXPECT_NE(error_of(R"("model_type": "qwen2", "num_key_value_heads": 2, "use_sliding_window": true)")
                .find("'use_sliding_window'"),
            std::string::npos);
  EXPECT_NE(error_of(R"("vocab_size": 0)").find("'vocab_size' must be a positive integer"), std::string::npos);
  EXPECT_THROW(parse_hf_config(R"({"hidden_size": 64})", "c.json"), ConfigError);  // vocab_size missing
  EXPECT_THROW(parse_hf_config("{not json", "c.json"), ConfigError);
  EXPECT_THROW(parse_hf_config("[]", "c.json"), ConfigError);
  EXPECT_THROW(read_hf_config("/nonexistent/config.json"), InputError);
}

TEST(IoHfConfig, FormatParsesBackToTheSameConfig) {
  ModelShape c = parse(R"("num_key_value_heads": 2, "head_dim": 8, "tie_word_embeddings": true, "eos_token_id": [3, 4],
      "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, "factor": 8, "low_freq_factor": 1,
      "high_freq_factor": 4, "original_max_position_embeddings": 1024}, "dtype": "bfloat16", "pad_token_id": 0)");
  const ModelShape back = parse_hf_config(format_hf_config(c), "written");
  EXPECT_EQ(back.num_key_value_heads, 2);
  EXPECT_EQ(back.head_dim, 8);
  EXPECT_TRUE(back.tie_word_embeddings);
  EXPECT_EQ(back.eos_token_ids, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(back.rope_scaling.type, RopeScalingType::llama3);
  EXPECT_EQ(back.rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_DOUBLE_EQ(back.rope_theta, 5e5);
  EXPECT_EQ(back.torch_dtype, "bfloat16");
  EXPECT_EQ(back.pad_token_id, 0);
  const std::string text = format_hf_config(c);
  EXPECT_NE(text.find("\"LlamaForCausalLM\""), std::string::npos);

  c.attention_output_bias = !c.attention_bias;
  EXPECT_THROW(format_hf_config(c), UserError);
}

// Each family writes its own architectures and keys, and reads back as itself; a config the family
// cannot describe is a UserError naming why.
TEST(IoHfConfig, FamiliesFormatAndParseBack) {
  ModelShape qwen3 =
      parse(R"("model_type": "qwen3", "num_key_value_heads": 2, "head_dim": 32, "tie_word_embeddings": true,
               "pad_token_id": 0)");
  std::string text = format_hf_config(qwen3);
  EXPECT_NE(text.find("\"Qwen3ForCausalLM\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"use_sliding_window\": false"), std::string::npos) << text;
  EXPECT_NE(text.find("\"attention_bias\": false"), std::string::npos) << text;
  ModelShape back = parse_hf_config(text, "written");
  EXPECT_EQ(back.model_type, "qwen3");
  EXPECT_EQ(back.qk_norm, QkNorm::per_head);
  EXPECT_EQ(back.head_dim, 32);
  EXPECT_TRUE(back.tie_word_embeddings);
  EXPECT_NE(format_hf_config(qwen3, HfHead::score).find("\"Qwen3ForSequenceClassification\""), std::string::npos);
  qwen3.attention_bias = qwen3.attention_output_bias = true;
  EXPECT_TRUE(parse_hf_config(format_hf_config(qwen3), "written").attention_output_bias);

  ModelShape mistral = parse(R"("model_type": "mistral", "num_key_value_heads": 2, "sliding_window": 4096)");
  text = format_hf_config(mistral);
  EXPECT_NE(text.find("\"MistralForCausalLM\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"sliding_window\": 4096"), std::string::npos) << text;
  EXPECT_EQ(text.find("attention_bias"), std::string::npos) << text;
  EXPECT_EQ(parse_hf_config(text, "written").sliding_window, 4096);
  mistral.sliding_window = 0;
  text = format_hf_config(mistral);
  EXPECT_NE(text.find("\"sliding_window\": null"), std::string::npos) << text;
  EXPECT_EQ(parse_hf_config(text, "written").sliding_window, 0);
  EXPECT_NE(format_hf_config(mistral, HfHead::score).find("\"MistralForSequenceClassification\""), std::string::npos);

  const auto user_error = [](const ModelShape& c) {
    try {
      format_hf_config(c);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "no UserError for model_type " << c.model_type;
    return std::string();
  };
  ModelShape c = parse("");
  c.qk_norm = QkNorm::per_head;
  EXPECT_NE(user_error(c).find("only model_type qwen3"), std::string::npos);
  c = parse("");
  c.sliding_window = 64;
  EXPECT_NE(user_error(c).find("only model_type mistral"), std::string::npos);
  c = parse(R"("model_type": "qwen3", "num_key_value_heads": 2)");
  c.qk_norm = QkNorm::none;
  EXPECT_NE(user_error(c).find("without q/k norms"), std::string::npos);
  c = parse(R"("model_type": "mistral", "num_key_value_heads": 2)");
  c.mlp_bias = true;
  EXPECT_NE(user_error(c).find("MistralConfig has none"), std::string::npos);
  c = parse("");
  c.model_type = "gemma";
  EXPECT_NE(user_error(c).find("supported: llama, mistral, qwen2, qwen3"), std::string::npos);
}

// Reward models: written as one-label sequence classifiers (transformers' keys), read back as
// HfHead::score; a classifier with several labels is not a Ferry score model.
TEST(IoHfConfig, ScoreHeadIsASequenceClassifierWithOneLabel) {
  ModelShape c = parse(R"("pad_token_id": 5, "eos_token_id": 2)");
  std::string text = format_hf_config(c, HfHead::score);
  EXPECT_NE(text.find("\"LlamaForSequenceClassification\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"LABEL_0\": 0"), std::string::npos) << text;
  EXPECT_NE(text.find("\"0\": \"LABEL_0\""), std::string::npos) << text;
  EXPECT_EQ(parse_hf_head(text, "written"), HfHead::score);
  EXPECT_EQ(parse_hf_config(text, "written").pad_token_id, 5);
  EXPECT_EQ(parse_hf_head(format_hf_config(c), "written"), HfHead::causal_lm);
  EXPECT_EQ(parse_hf_head("{}", "empty"), HfHead::causal_lm);

  c.pad_token_id = -1;  // transformers needs a pad id to score a batch: the EOS id stands in
  EXPECT_EQ(parse_hf_config(format_hf_config(c, HfHead::score), "written").pad_token_id, 2);
  c.eos_token_ids.clear();
  EXPECT_THROW(format_hf_config(c, HfHead::score), UserError);

  c = parse(R"("model_type": "qwen2", "num_key_value_heads": 2)");
  c.pad_token_id = 0;
  EXPECT_NE(format_hf_config(c, HfHead::score).find("\"Qwen2ForSequenceClassification\""), std::string::npos);

  EXPECT_THROW(parse_hf_head(R"({"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "a", "1": "b"}})", "c"),
               ConfigError);
  EXPECT_THROW(parse_hf_head(R"({"architectures": ["LlamaForSequenceClassification"], "num_labels": 3})", "c"), ConfigError);
  EXPECT_THROW(parse_hf_head(R"({"architectures": "LlamaForCausalLM"})", "c"), ConfigError);
}

}  // namespace
}  // namespace ferry::io
