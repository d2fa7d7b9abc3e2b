// Checks a model load runs before allocating (src/io/hf_tensor_specs.h): config.json's shapes
// against the weight files' headers, and the model's size against the host's memory. The weights
// here are written tensor by tensor with names and shapes spelled out, not taken from the specs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <string>

#include "core/error.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_tensor_specs.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/tiny_llama_config.h"

namespace ferry::io {
namespace {

// hidden 32, 4 heads of 8 (2 for keys and values), intermediate 48, vocab 100, 2 layers, untied.
ModelShape small_config() {
  return test_support::tiny_llama_config({.vocab_size = 100,
                                          .hidden_size = 32,
                                          .intermediate_size = 48,
                                          .head_dim = 8,
                                          .max_position_embeddings = 4096,
                                          .rms_norm_eps = 1e-6});
}

std::filesystem::path write_small_weights(const std::string& name, int64_t intermediate = 48) {
  const std::filesystem::path dir = test_support::process_scratch_dir("ferry_tensor_specs") / name;
  TensorMap t;
  const auto zeros = [](std::vector<int64_t> shape) { return at::zeros(shape, at::kBFloat16); };
  t["model.embed_tokens.weight"] = zeros({100, 32});
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    t[p + "input_layernorm.weight"] = zeros({32});
    t[p + "self_attn.q_proj.weight"] = zeros({32, 32});
    t[p + "self_attn.k_proj.weight"] = zeros({16, 32});
    t[p + "self_attn.v_proj.weight"] = zeros({16, 32});
    t[p + "self_attn.o_proj.weight"] = zeros({32, 32});
    t[p + "post_attention_layernorm.weight"] = zeros({32});
    t[p + "mlp.gate_proj.weight"] = zeros({intermediate, 32});
    t[p + "mlp.up_proj.weight"] = zeros({intermediate, 32});
    t[p + "mlp.down_proj.weight"] = zeros({32, intermediate});
  }
  t["model.norm.weight"] = zeros({32});
  t["lm_head.weight"] = zeros({100, 32});
  save_hf_weights(dir, t);
  return dir;
}

std::string mismatch_message(const ModelShape& config, const std::filesystem::path& dir) {
  try {
    check_weights_match_config(config, HfWeights(dir), dir / "config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(HfTensorSpecs, MatchingWeightsPass) {
  const std::filesystem::path dir = write_small_weights("ok");
  EXPECT_EQ(mismatch_message(small_config(), dir), "");
}

// bitsandbytes NF4 with bnb_4bit_quant_storage=bfloat16: q_proj's 32 x 32 codes packed two a byte
// into 512 bytes, stored as a [256, 1] bf16 tensor beside its absmax.
TEST(HfTensorSpecs, PackedNf4WeightsAreCheckedByTheirBytes) {
  const std::filesystem::path dir = test_support::process_scratch_dir("ferry_tensor_specs") / "nf4";
  TensorMap t = load_hf_weights(write_small_weights("nf4_source"));
  t["model.layers.0.self_attn.q_proj.weight"] = at::zeros({256, 1}, at::kBFloat16);
  t["model.layers.0.self_attn.q_proj.weight.absmax"] = at::ones({16}, at::kFloat);
  save_hf_weights(dir, t);
  EXPECT_EQ(mismatch_message(small_config(), dir), "");
  ModelShape config = small_config();
  config.num_attention_heads = 8;  // 64 x 32 codes: 1024 bytes, not 512
  EXPECT_NE(mismatch_message(config, dir).find("num_attention_heads x head_dim is 64"), std::string::npos);
}

TEST(HfTensorSpecs, AHugeIntermediateSizeNamesTheKeyItsValueAndTheStoredShape) {
  const std::filesystem::path dir = write_small_weights("intermediate");
  ModelShape config = small_config();
  config.intermediate_size = 1000000000000;
  const std::string message = mismatch_message(config, dir);
  EXPECT_NE(message.find((dir / "config.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("intermediate_size is 1000000000000"), std::string::npos) << message;
  EXPECT_NE(message.find("the weights say 48"), std::string::npos) << message;
  EXPECT_NE(message.find("model.layers.0.mlp.gate_proj.weight is [48, 32]"), std::string::npos) << message;
}

TEST(HfTensorSpecs, EachShapeKeyIsNamed) {
  const std::filesystem::path dir = write_small_weights("keys");
  const auto named = [&](auto change, const std::string& text) {
    ModelShape config = small_config();
    change(config);
    const std::string message = mismatch_message(config, dir);
    EXPECT_NE(message.find(text), std::string::npos) << text << " not in: " << message;
  };
  named([](ModelShape& c) { c.vocab_size = 101; }, "vocab_size is 101, but the weights say 100");
  named([](ModelShape& c) { c.hidden_size = 64; }, "hidden_size is 64, but the weights say 32");
  named([](ModelShape& c) { c.num_key_value_heads = 4; }, "num_key_value_heads x head_dim is 32, but the weights say 16");
  named([](ModelShape& c) { c.num_hidden_layers = 1000000000; },
        "num_hidden_layers is 1000000000, but the weights hold 2 decoder layers");
  named([](ModelShape& c) { c.tie_word_embeddings = true; c.vocab_size = 7; }, "vocab_size is 7");
}

TEST(HfTensorSpecs, AModelLargerThanTheHostIsRefusedWithTheFigures) {
  ModelShape config = small_config();
  config.hidden_size = 4096;
  config.vocab_size = 32000;
  config.intermediate_size = 11008;
  config.num_hidden_layers = 32;
  config.num_attention_heads = 32;
  config.num_key_value_heads = 32;
  config.head_dim = 128;  // Llama-2-7B: 6.74 billion parameters
  const uint64_t gib = uint64_t{1} << 30;
  try {
    check_model_fits_host(config, 4, 0, "loading model folder m", 8 * gib);
    FAIL() << "7B parameters in float32 fit in 8 GiB";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("loading model folder m needs 25.10 GiB of host memory (6.74 billion parameters x 4 bytes)"),
              std::string::npos) << message;
    EXPECT_NE(message.find("only 8.00 GiB is available (MemAvailable)"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_model_fits_host(config, 4, 0, "m", 32 * gib));
  config.hidden_size = int64_t{1} << 40;  // the parameter count overflows int64: still a clear refusal
  EXPECT_THROW(check_model_fits_host(config, 4, 0, "m", 32 * gib), InputError);
}

}  // namespace
}  // namespace ferry::io
