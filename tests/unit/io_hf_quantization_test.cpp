// config.json's quantization_config (src/io/hf_quantization.h): what transformers 5 writes for a
// bitsandbytes 4-bit NF4 model is read (double quant, compute dtype, skip modules); fp4, 8-bit,
// other methods and malformed values are InputErrors naming config.json and the key, also when
// read_hf_config meets them (every command reads config.json that way).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "src/io/hf_config.h"
#include "src/io/hf_quantization.h"

namespace ferry::io {
namespace {

const std::string kModel = R"("vocab_size": 128, "hidden_size": 64, "intermediate_size": 96,
                              "num_hidden_layers": 2, "num_attention_heads": 4)";

// What transformers 5.x save_pretrained writes for BitsAndBytesConfig(load_in_4bit=True,
// bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=float32),
// with `change` merged in (a key replaced by a later duplicate: nlohmann keeps the last).
std::string bnb_config(const std::string& change = "") {
  return "{" + kModel + R"(, "quantization_config": {"_load_in_4bit": true, "_load_in_8bit": false,
    "bnb_4bit_compute_dtype": "float32", "bnb_4bit_quant_storage": "uint8", "bnb_4bit_quant_type": "nf4",
    "bnb_4bit_use_double_quant": true, "llm_int8_enable_fp32_cpu_offload": false,
    "llm_int8_has_fp16_weight": false, "llm_int8_skip_modules": null, "llm_int8_threshold": 6.0,
    "load_in_4bit": true, "load_in_8bit": false, "quant_method": "bitsandbytes")" +
         (change.empty() ? "" : ", " + change) + "}}";
}

std::string error_of(const std::string& change) {
  try {
    parse_hf_quantization(bnb_config(change), "model/config.json");
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError for " << change;
  return "";
}

TEST(IoHfQuantization, ReadsWhatTransformersWritesForBitsandbytesNf4) {
  const HfQuantization q = parse_hf_quantization(bnb_config(), "config.json");
  EXPECT_TRUE(q.nf4);
  EXPECT_TRUE(q.double_quant);
  EXPECT_EQ(q.compute_dtype, "float32");
  EXPECT_TRUE(q.skip_modules.empty());
  const HfQuantization plain = parse_hf_quantization(
      bnb_config(R"("bnb_4bit_use_double_quant": false, "llm_int8_skip_modules": ["lm_head", "o_proj"],
                    "bnb_4bit_quant_storage": "bfloat16")"),
      "config.json");
  EXPECT_TRUE(plain.nf4);
  EXPECT_FALSE(plain.double_quant);
  EXPECT_EQ(plain.skip_modules, (std::vector<std::string>{"lm_head", "o_proj"}));
  // The model itself parses as before.
  EXPECT_EQ(parse_hf_config(bnb_config(), "config.json").hidden_size, 64);
}

TEST(IoHfQuantization, NoQuantizationConfigIsFullPrecision) {
  EXPECT_FALSE(parse_hf_quantization("{" + kModel + "}", "config.json").nf4);
  EXPECT_FALSE(parse_hf_quantization("{" + kModel + R"(, "quantization_config": null})", "config.json").nf4);
}

TEST(IoHfQuantization, UnsupportedFormsNameTheFileAndKeyAndSayWhatToDo) {
  std::string e = error_of(R"("bnb_4bit_quant_type": "fp4")");
  EXPECT_NE(e.find("model/config.json: 'quantization_config.bnb_4bit_quant_type' is 'fp4'"), std::string::npos) << e;
  EXPECT_NE(e.find("use the full-precision model instead"), std::string::npos) << e;
  e = error_of(R"("load_in_8bit": true, "load_in_4bit": false, "_load_in_4bit": false)");
  EXPECT_NE(e.find("'quantization_config.load_in_8bit' is true"), std::string::npos) << e;
  e = error_of(R"("quant_method": "gptq")");
  EXPECT_NE(e.find("'quantization_config.quant_method' is 'gptq'"), std::string::npos) << e;
  e = error_of(R"("load_in_4bit": false, "_load_in_4bit": false)");
  EXPECT_NE(e.find("'quantization_config.load_in_4bit' is not true"), std::string::npos) << e;
  e = error_of(R"("bnb_4bit_use_double_quant": "yes")");
  EXPECT_NE(e.find("'quantization_config.bnb_4bit_use_double_quant' must be true or false"), std::string::npos) << e;
  e = error_of(R"("llm_int8_skip_modules": "lm_head")");
  EXPECT_NE(e.find("'quantization_config.llm_int8_skip_modules' must be a list"), std::string::npos) << e;
  e = error_of(R"("bnb_4bit_quant_storage": "int4")");
  EXPECT_NE(e.find("'quantization_config.bnb_4bit_quant_storage' is 'int4'"), std::string::npos) << e;
  // transformers' default quant type is fp4: a 4-bit config without one is fp4.
  EXPECT_THROW(parse_hf_quantization("{" + kModel + R"(, "quantization_config": {"load_in_4bit": true}})", "c.json"),
               InputError);
  EXPECT_THROW(parse_hf_quantization("{" + kModel + R"(, "quantization_config": [1]})", "c.json"), InputError);
  // Every command reads config.json through parse_hf_config, which refuses them too.
  try {
    parse_hf_config(bnb_config(R"("bnb_4bit_quant_type": "fp4")"), "model/config.json");
    ADD_FAILURE() << "parse_hf_config accepted an fp4 checkpoint";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("bnb_4bit_quant_type"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace ferry::io
