// Reading config.json's quantization_config (see hf_quantization.h). Defaults follow transformers'
// BitsAndBytesConfig (bnb_4bit_quant_type "fp4", double quant off).
#include "src/io/hf_quantization.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace ferry::io {
namespace {

using nlohmann::json;

constexpr const char* kUseInstead =
    "use the full-precision model instead (lora.quantize_base: nf4 quantises it to NF4 while loading) or a "
    "bitsandbytes 4-bit nf4 checkpoint";

// `quantization_config.<key>` of `config`, with errors naming the file and the key.
class QuantKeys {
 public:
  QuantKeys(const json& config, std::string source) : config_(config), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw InputError(source_ + ": 'quantization_config." + key + "' " + problem);
  }

  bool has(const std::string& key) const { return config_.contains(key) && !config_.at(key).is_null(); }

  // transformers writes both `load_in_4bit` and its private twin `_load_in_4bit`; either counts.
  bool flag(const std::string& key) const {
    for (const std::string& name : {key, "_" + key}) {
      if (!has(name)) continue;
      if (!config_.at(name).is_boolean()) fail(name, "must be true or false, got " + config_.at(name).dump());
      if (config_.at(name).get<bool>()) return true;
    }
    return false;
  }

  std::string string(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    if (!config_.at(key).is_string()) fail(key, "must be a string, got " + config_.at(key).dump());
    return config_.at(key).get<std::string>();
  }

  const json& at(const std::string& key) const { return config_.at(key); }

 private:
  const json& config_;
  std::string source_;
};

}  // namespace

HfQuantization parse_hf_quantization(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw InputError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  HfQuantization out;
  if (!root.is_object() || !root.contains("quantization_config") || root.at("quantization_config").is_null()) return out;
  const json& config = root.at("quantization_config");
  if (!config.is_object()) {
    throw InputError(source + ": 'quantization_config' must be an object, got " + config.dump());
  }
  const QuantKeys keys(config, source);
  // Older bitsandbytes configs carry no quant_method; transformers reads them as bitsandbytes.
  const std::string method = keys.string("quant_method", "bitsandbytes");
  if (method != "bitsandbytes") {
    keys.fail("quant_method", "is '" + method + "': Ferry reads bitsandbytes 4-bit (nf4) checkpoints only; " + kUseInstead);
  }
  if (keys.flag("load_in_8bit")) {
    keys.fail("load_in_8bit", std::string("is true: Ferry does not read bitsandbytes 8-bit (LLM.int8) checkpoints; ") +
                                  kUseInstead);
  }
  if (!keys.flag("load_in_4bit")) {
    keys.fail("load_in_4bit", std::string("is not true, and neither is load_in_8bit: the folder does not say how its "
                                          "weights are stored; remove quantization_config if they are full precision, "
                                          "else ") + kUseInstead);
  }
  const std::string quant_type = keys.string("bnb_4bit_quant_type", "fp4");  // BitsAndBytesConfig's default
  if (quant_type != "nf4") {
    keys.fail("bnb_4bit_quant_type", "is '" + quant_type + "': Ferry supports the nf4 4-bit type only (not fp4); " +
                                         kUseInstead);
  }
  out.nf4 = true;
  if (keys.has("bnb_4bit_use_double_quant")) {
    if (!keys.at("bnb_4bit_use_double_quant").is_boolean()) {
      keys.fail("bnb_4bit_use_double_quant", "must be true or false, got " + keys.at("bnb_4bit_use_double_quant").dump());
    }
    out.double_quant = keys.at("bnb_4bit_use_double_quant").get<bool>();
  }
  out.compute_dtype = keys.string("bnb_4bit_compute_dtype", "");
  // The packed codes may be stored as another dtype (FSDP); they are read as their bytes.
  const std::string storage = keys.string("bnb_4bit_quant_storage", "uint8");
  if (storage != "uint8" && storage != "int8" && storage != "float16" && storage != "bfloat16" &&
      storage != "float32") {
    keys.fail("bnb_4bit_quant_storage", "is '" + storage + "'; expected uint8, int8, float16, bfloat16 or float32");
  }
  if (keys.has("llm_int8_skip_modules")) {
    const json& skip = keys.at("llm_int8_skip_modules");
    if (!skip.is_array()) keys.fail("llm_int8_skip_modules", "must be a list of module names or null, got " + skip.dump());
    for (const json& name : skip) {
      if (!name.is_string()) keys.fail("llm_int8_skip_modules", "must be a list of module names, got " + skip.dump());
      out.skip_modules.push_back(name.get<std::string>());
    }
  }
  return out;
}

HfQuantization read_hf_quantization(const std::filesystem::path& config_json) {
  return parse_hf_quantization(read_file(config_json), config_json.string());
}

}  // namespace ferry::io
