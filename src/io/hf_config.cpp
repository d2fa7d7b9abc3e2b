// config.json reading and writing (see hf_config.h). Defaults follow transformers' LlamaConfig,
// MistralConfig, Qwen2Config and Qwen3Config; keys Ferry does not use are ignored.
#include "src/io/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/hf_quantization.h"

namespace ferry::io {
namespace {

using nlohmann::json;

// Typed access to one JSON object with errors that name the file and the key path.
class Keys {
 public:
  Keys(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool has(const std::string& key) const { return object_.contains(key) && !object_.at(key).is_null(); }

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw ConfigError(source_ + ": '" + prefix_ + key + "' " + problem);
  }

  int64_t positive_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    const int64_t value = integer(key, fallback);
    if (value <= 0) fail(key, "must be a positive integer, got " + std::to_string(value));
    return value;
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "is missing; a Llama-family config.json needs it");
    }
    const json& value = object_.at(key);
    if (!value.is_number_integer()) fail(key, "must be an integer, got " + value.dump());
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail(key, "is too large: " + value.dump());
    }
    return value.get<int64_t>();
  }

  double positive_number(const std::string& key, std::optional<double> fallback = std::nullopt) const {
    if (!has(key)) {
      if (fallback) return *fallback;
      fail(key, "is missing");
    }
    const json& value = object_.at(key);
    if (!value.is_number()) fail(key, "must be a number, got " + value.dump());
    const double number = value.get<double>();
    if (!(number > 0) || !std::isfinite(number)) fail(key, "must be a positive number, got " + value.dump());
    return number;
  }

  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_boolean()) fail(key, "must be true or false, got " + value.dump());
    return value.get<bool>();
  }

  std::optional<std::string> string(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    const json& value = object_.at(key);
    if (!value.is_string()) fail(key, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }

  // A token id: an integer, or null / absent -> -1 (none).
  int64_t token_id(const std::string& key, int64_t fallback) const {
    if (!object_.contains(key)) return fallback;
    if (object_.at(key).is_null()) return -1;
    const int64_t value = integer(key);
    if (value < 0) fail(key, "must be a non-negative token id or null, got " + std::to_string(value));
    return value;
  }

  const json& object() const { return object_; }
  const std::string& source() const { return source_; }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

// Fills rope_theta and rope_scaling from either `rope_parameters` (transformers >= 5) or
// `rope_theta` + `rope_scaling` (older files).
void read_rope(const Keys& top, LlamaConfig& config) {
  const double legacy_theta = top.positive_number("rope_theta", 10000.0);
  std::string container = "rope_scaling";
  if (top.has("rope_parameters")) container = "rope_parameters";
  if (!top.has(container)) {
    config.rope_theta = legacy_theta;
    return;
  }
  const json& rope = top.object().at(container);
  if (!rope.is_object()) top.fail(container, "must be an object or null, got " + rope.dump());
  for (const auto& [key, value] : rope.items()) {
    if (value.is_object()) {
      top.fail(container + "." + key, "is a per-layer-type rope setting, which Ferry does not support (one rope for all layers)");
    }
  }
  const Keys keys(rope, top.source(), container + ".");
  config.rope_theta = keys.positive_number("rope_theta", legacy_theta);

  std::string type_key = keys.has("rope_type") ? "rope_type" : "type";
  const std::string type = keys.string(type_key).value_or("default");
  RopeScaling& scaling = config.rope_scaling;
  if (type == "default") {
    scaling = RopeScaling{};
  } else if (type == "linear") {
    scaling.type = RopeScalingType::linear;
    scaling.factor = keys.positive_number("factor");
  } else if (type == "llama3") {
    scaling.type = RopeScalingType::llama3;
    scaling.factor = keys.positive_number("factor");
    scaling.low_freq_factor = keys.positive_number("low_freq_factor");
    scaling.high_freq_factor = keys.positive_number("high_freq_factor");
    // transformers falls back to max_position_embeddings when the key is absent.
    scaling.original_max_position_embeddings =
        keys.positive_int("original_max_position_embeddings", config.max_position_embeddings);
    if (scaling.high_freq_factor <= scaling.low_freq_factor) {
      keys.fail("high_freq_factor", "must be larger than low_freq_factor");
    }
  } else {
    keys.fail(type_key, "is '" + type + "', which Ferry does not support (supported: default, linear, llama3)");
  }
}

std::string read_dtype(const Keys& top) {
  const std::string key = top.has("dtype") ? "dtype" : "torch_dtype";
  const std::string dtype = top.string(key).value_or("float32");
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16" && dtype != "float64") {
    top.fail(key, "is '" + dtype + "'; expected float32, float16, bfloat16 or float64");
  }
  return dtype;
}

constexpr const char* kSupportedModelTypes = "llama, mistral, qwen2, qwen3";
constexpr const char* kSupportedArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM and their *ForSequenceClassification";

// `architectures` names the class transformers would build. Ferry has a causal LM and a one-output
// score head; the model family itself comes from model_type, as transformers' Auto* classes take it.
void check_architectures(const Keys& top) {
  if (!top.has("architectures")) return;
  const json& names = top.object().at("architectures");
  if (!names.is_array()) top.fail("architectures", "must be a list of class names, got " + names.dump());
  for (const json& name : names) {
    const std::string text = name.is_string() ? name.get<std::string>() : name.dump();
    if (!name.is_string() || !(text.ends_with("ForCausalLM") || text.ends_with("ForSequenceClassification"))) {
      top.fail("architectures", "names " + text + ", which Ferry does not support (supported: " +
                                    kSupportedArchitectures + ")");
    }
  }
}

// Qwen2 / Qwen3: sliding-window layers (use_sliding_window, or layer_types that transformers 5
// writes) are refused; Ferry runs every layer with full attention.
void check_full_attention(const Keys& top) {
  if (top.boolean("use_sliding_window", false)) {
    top.fail("use_sliding_window", "is true; Ferry supports full attention only (set it to false to train with full "
                                   "attention)");
  }
  if (!top.has("layer_types")) return;
  const json& types = top.object().at("layer_types");
  if (!types.is_array()) top.fail("layer_types", "must be a list, got " + types.dump());
  for (const json& layer : types) {
    if (layer != "full_attention") {
      top.fail("layer_types", "holds " + layer.dump() + "; Ferry supports full_attention layers only");
    }
  }
}

// Mistral's `sliding_window`: null -> 0 (full attention); absent -> 4096, MistralConfig's default.
// Ferry honours any window (src/model/attention_mask.h): it only masks once a sequence is longer.
int64_t read_sliding_window(const Keys& top) {
  if (!top.object().contains("sliding_window")) return 4096;
  if (!top.has("sliding_window")) return 0;
  return top.positive_int("sliding_window");
}

// The class-name prefix of `config`'s family in transformers (Llama, Mistral, Qwen2, Qwen3), after
// checking that the family's config.json can describe the model; throws UserError when it cannot.
std::string writable_family(const LlamaConfig& config) {
  const std::string& type = config.model_type;
  const bool llama = type == "llama", qwen2 = type == "qwen2", qwen3 = type == "qwen3", mistral = type == "mistral";
  if (!llama && !qwen2 && !qwen3 && !mistral) {
    throw UserError("cannot write config.json for model_type '" + type + "' (supported: " + kSupportedModelTypes + ")");
  }
  if (config.qk_norm && !qwen3) {
    throw UserError("cannot write a " + type + " config.json for a model with q/k norms (self_attn.q_norm, k_norm): "
                    "only model_type qwen3 has them");
  }
  if (qwen3 && !config.qk_norm) {
    throw UserError("cannot write a qwen3 config.json for a model without q/k norms: every Qwen3 attention layer has "
                    "self_attn.q_norm and k_norm");
  }
  if (config.sliding_window > 0 && !mistral) {
    throw UserError("cannot write a " + type + " config.json with a sliding window of " +
                    std::to_string(config.sliding_window) + " for every layer: only model_type mistral has that");
  }
  if (qwen2 && !(config.attention_bias && !config.attention_output_bias && !config.mlp_bias)) {
    throw UserError("cannot write a qwen2 config.json: Qwen2 models have q/k/v biases and no o_proj or MLP biases");
  }
  if (mistral && (config.attention_bias || config.attention_output_bias || config.mlp_bias)) {
    throw UserError("cannot write a mistral config.json for a model with biases: MistralConfig has none (model_type "
                    "llama has attention_bias and mlp_bias)");
  }
  if (qwen3 && config.mlp_bias) {
    throw UserError("cannot write a qwen3 config.json with MLP biases: Qwen3Config has none");
  }
  if ((llama || qwen3) && config.attention_bias != config.attention_output_bias) {
    throw UserError("cannot write a " + type + " config.json with q/k/v biases but no o_proj bias; transformers' "
                    "config has one attention_bias switch for all four (use model_type qwen2 for q/k/v-only biases)");
  }
  return llama ? "Llama" : mistral ? "Mistral" : qwen2 ? "Qwen2" : "Qwen3";
}

}  // namespace

LlamaConfig parse_hf_config(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ConfigError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!root.is_object()) throw ConfigError(source + ": must be a JSON object");
  const Keys top(root, source);

  LlamaConfig config;
  config.model_type = top.string("model_type").value_or("llama");
  const std::string& type = config.model_type;
  const bool qwen2 = type == "qwen2", qwen3 = type == "qwen3", mistral = type == "mistral";
  if (type != "llama" && !qwen2 && !qwen3 && !mistral) {
    top.fail("model_type", "is '" + type + "', which Ferry does not support (supported: " + kSupportedModelTypes + ")");
  }
  check_architectures(top);
  // A quantised checkpoint Ferry cannot read (fp4, 8-bit, GPTQ, ...) is refused here, before any
  // command meets its weights; bitsandbytes NF4 folders load (src/io/hf_quantization.h).
  parse_hf_quantization(json_text, source);
  if (const auto act = top.string("hidden_act"); act && *act != "silu") {
    top.fail("hidden_act", "is '" + *act + "'; Llama-family models use silu, and Ferry supports only that");
  }

  config.vocab_size = top.positive_int("vocab_size");
  config.hidden_size = top.positive_int("hidden_size");
  config.intermediate_size = top.positive_int("intermediate_size");
  config.num_hidden_layers = top.positive_int("num_hidden_layers");
  config.num_attention_heads = top.positive_int("num_attention_heads");
  // Absent: the family config class's default (Qwen2/Qwen3Config 32, MistralConfig 8); null (and
  // absent for llama): num_attention_heads, no grouping.
  const int64_t default_kv_heads = top.object().contains("num_key_value_heads") ? config.num_attention_heads
                                   : qwen2 || qwen3                             ? 32
                                   : mistral                                    ? 8
                                                                                : config.num_attention_heads;
  config.num_key_value_heads = top.positive_int("num_key_value_heads", default_kv_heads);
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    top.fail("num_key_value_heads", "(" + std::to_string(config.num_key_value_heads) + ") must divide num_attention_heads (" +
                                        std::to_string(config.num_attention_heads) + ")");
  }
  if (qwen3) {
    config.head_dim = top.positive_int("head_dim", 128);  // Qwen3Config's default, not hidden / heads
  } else {
    if (!top.has("head_dim") && config.hidden_size % config.num_attention_heads != 0) {
      top.fail("hidden_size", "(" + std::to_string(config.hidden_size) + ") is not a multiple of num_attention_heads (" +
                                  std::to_string(config.num_attention_heads) + ") and no head_dim is given");
    }
    config.head_dim = top.positive_int("head_dim", config.hidden_size / config.num_attention_heads);
  }
  const int64_t default_positions = qwen2 || qwen3 ? 32768 : mistral ? 131072 : 2048;
  config.max_position_embeddings = top.positive_int("max_position_embeddings", default_positions);
  config.rms_norm_eps = top.positive_number("rms_norm_eps", 1e-6);
  read_rope(top, config);

  config.tie_word_embeddings = top.boolean("tie_word_embeddings", false);
  if (qwen2) {
    // Qwen2 always has q/k/v biases and no o_proj or MLP bias.
    config.attention_bias = true;
    config.attention_output_bias = false;
    config.mlp_bias = false;
  } else if (qwen3) {
    // Qwen3: one attention_bias switch for q/k/v/o (off in the released models), no MLP bias,
    // RMSNorm on every query and key head.
    config.attention_bias = top.boolean("attention_bias", false);
    config.attention_output_bias = config.attention_bias;
    config.mlp_bias = false;
    config.qk_norm = true;
  } else if (mistral) {
    // MistralConfig has no bias switches: no biases anywhere.
    config.attention_bias = config.attention_output_bias = config.mlp_bias = false;
  } else {
    config.attention_bias = top.boolean("attention_bias", false);
    config.attention_output_bias = config.attention_bias;
    config.mlp_bias = top.boolean("mlp_bias", false);
  }
  if (qwen2 || qwen3) check_full_attention(top);
  if (mistral) config.sliding_window = read_sliding_window(top);

  config.bos_token_id = top.token_id("bos_token_id", qwen2 || qwen3 ? -1 : 1);
  config.pad_token_id = top.token_id("pad_token_id", -1);
  config.eos_token_ids.clear();
  if (!root.contains("eos_token_id")) {
    if (!qwen2 && !qwen3) config.eos_token_ids = {2};
  } else if (root["eos_token_id"].is_array()) {
    for (size_t i = 0; i < root["eos_token_id"].size(); ++i) {
      const json& id = root["eos_token_id"][i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        top.fail("eos_token_id", "must be a token id or a list of them, got " + root["eos_token_id"].dump());
      }
      config.eos_token_ids.push_back(id.get<int64_t>());
    }
  } else if (!root["eos_token_id"].is_null()) {
    const int64_t id = top.token_id("eos_token_id", -1);
    config.eos_token_ids.push_back(id);
  }
  config.torch_dtype = read_dtype(top);
  return config;
}

LlamaConfig read_hf_config(const std::filesystem::path& config_json) {
  return parse_hf_config(read_file(config_json), config_json.string());
}

HfHead parse_hf_head(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ConfigError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!root.is_object()) throw ConfigError(source + ": must be a JSON object");
  const Keys top(root, source);
  bool classifier = false;
  if (top.has("architectures")) {
    const json& names = root.at("architectures");
    if (!names.is_array()) top.fail("architectures", "must be a list of class names, got " + names.dump());
    for (const json& name : names) {
      if (name.is_string() && name.get<std::string>().ends_with("ForSequenceClassification")) classifier = true;
    }
  }
  if (!classifier) return HfHead::causal_lm;
  // transformers writes id2label (num_labels is derived from it); older files may carry num_labels.
  int64_t labels = 1;
  if (top.has("id2label")) {
    if (!root.at("id2label").is_object()) top.fail("id2label", "must be an object, got " + root.at("id2label").dump());
    labels = static_cast<int64_t>(root.at("id2label").size());
  } else if (top.has("num_labels")) {
    labels = top.integer("num_labels");
  }
  if (labels != 1) {
    top.fail(top.has("id2label") ? "id2label" : "num_labels",
             "gives " + std::to_string(labels) + " labels; Ferry's score models (reward models, critics) have exactly one");
  }
  return HfHead::score;
}

HfHead read_hf_head(const std::filesystem::path& config_json) {
  return parse_hf_head(read_file(config_json), config_json.string());
}

std::string format_hf_config(const LlamaConfig& config, HfHead head) {
  const std::string family = writable_family(config);
  const bool qwen2 = family == "Qwen2", qwen3 = family == "Qwen3", mistral = family == "Mistral";
  const bool score = head == HfHead::score;
  // transformers finds each row's last token through pad_token_id (see hf_config.h).
  const int64_t pad_token_id =
      config.pad_token_id >= 0 || !score || config.eos_token_ids.empty() ? config.pad_token_id : config.eos_token_ids.front();
  if (score && pad_token_id < 0) {
    throw UserError("cannot write a sequence-classification config.json without a pad or EOS token id: transformers "
                    "needs pad_token_id to find each row's last token (set the model's pad_token_id)");
  }
  json out;
  if (score) {
    out["architectures"] = {family + "ForSequenceClassification"};
    out["id2label"] = {{"0", "LABEL_0"}};
    out["label2id"] = {{"LABEL_0", 0}};
  } else {
    out["architectures"] = {family + "ForCausalLM"};
  }
  out["model_type"] = config.model_type;
  out["vocab_size"] = config.vocab_size;
  out["hidden_size"] = config.hidden_size;
  out["intermediate_size"] = config.intermediate_size;
  out["num_hidden_layers"] = config.num_hidden_layers;
  out["num_attention_heads"] = config.num_attention_heads;
  out["num_key_value_heads"] = config.num_key_value_heads;
  out["head_dim"] = config.head_dim;
  out["hidden_act"] = "silu";
  out["max_position_embeddings"] = config.max_position_embeddings;
  out["rms_norm_eps"] = config.rms_norm_eps;
  out["initializer_range"] = 0.02;
  out["attention_dropout"] = 0.0;
  out["use_cache"] = true;
  out["tie_word_embeddings"] = config.tie_word_embeddings;
  if (qwen2 || qwen3) {
    if (qwen3) out["attention_bias"] = config.attention_bias;
    out["use_sliding_window"] = false;
    out["sliding_window"] = nullptr;
  } else if (mistral) {
    out["sliding_window"] = config.sliding_window > 0 ? json(config.sliding_window) : json(nullptr);
  } else {
    out["attention_bias"] = config.attention_bias;
    out["mlp_bias"] = config.mlp_bias;
  }

  // transformers 5 keeps everything rope in `rope_parameters`; older readers (transformers 4,
  // conversion scripts) look for `rope_theta` and `rope_scaling`, so both forms are written.
  json rope = {{"rope_theta", config.rope_theta}};
  json legacy_scaling = nullptr;
  const RopeScaling& scaling = config.rope_scaling;
  switch (scaling.type) {
    case RopeScalingType::none:
      rope["rope_type"] = "default";
      break;
    case RopeScalingType::linear:
      rope["rope_type"] = "linear";
      rope["factor"] = scaling.factor;
      legacy_scaling = {{"rope_type", "linear"}, {"factor", scaling.factor}};
      break;
    case RopeScalingType::llama3:
      rope["rope_type"] = "llama3";
      rope["factor"] = scaling.factor;
      rope["low_freq_factor"] = scaling.low_freq_factor;
      rope["high_freq_factor"] = scaling.high_freq_factor;
      rope["original_max_position_embeddings"] = scaling.original_max_position_embeddings;
      legacy_scaling = rope;
      legacy_scaling.erase("rope_theta");
      break;
  }
  out["rope_parameters"] = rope;
  out["rope_theta"] = config.rope_theta;
  out["rope_scaling"] = legacy_scaling;

  const auto token = [](int64_t id) { return id < 0 ? json(nullptr) : json(id); };
  out["bos_token_id"] = token(config.bos_token_id);
  out["pad_token_id"] = token(pad_token_id);
  if (config.eos_token_ids.empty()) {
    out["eos_token_id"] = nullptr;
  } else if (config.eos_token_ids.size() == 1) {
    out["eos_token_id"] = config.eos_token_ids[0];
  } else {
    out["eos_token_id"] = config.eos_token_ids;
  }
  out["dtype"] = config.torch_dtype;
  return out.dump(2) + "\n";
}

void write_hf_config(const std::filesystem::path& config_json, const LlamaConfig& config, HfHead head) {
  write_file_atomic(config_json, format_hf_config(config, head));
}

}  // namespace ferry::io
