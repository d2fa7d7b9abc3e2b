// config.json reading and writing (see hf_config.h): the keys every family shares, here, with the
// family's defaults; the family's own keys in its description (src/model/family/). Keys Ferry does
// not use are ignored.
#include "src/io/hf_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/hf_quantization.h"
#include "src/model/family/config_keys.h"
#include "src/model/family/model_family.h"

namespace ferry::io {
namespace {

using nlohmann::json;

// Fills rope_theta and rope_scaling from either `rope_parameters` (transformers >= 5) or
// `rope_theta` + `rope_scaling` (older files).
// With `per_layer_type` (Gemma 3, OLMo 3) the object may hold {"full_attention": {...},
// "sliding_attention": {...}}: the full layers' settings are read as above, the sliding layers'
// must be plain RoPE and give sliding_rope_theta.
void read_rope(const ConfigKeys& top, ModelShape& config, bool per_layer_type, double default_theta,
               double& rope_partial_rotary_factor) {
  const double legacy_theta = top.positive_number("rope_theta", default_theta);
  std::string container = "rope_scaling";
  if (top.has("rope_parameters")) container = "rope_parameters";
  if (!top.has(container)) {
    config.rope_theta = legacy_theta;
    return;
  }
  const json* rope = &top.object().at(container);
  if (!rope->is_object()) top.fail(container, "must be an object or null, got " + rope->dump());
  if (per_layer_type && (rope->contains("full_attention") || rope->contains("sliding_attention"))) {
    for (const auto& [key, value] : rope->items()) {
      if (key != "full_attention" && key != "sliding_attention") {
        top.fail(container + "." + key, "is not a layer type (full_attention, sliding_attention)");
      }
      if (!value.is_object()) top.fail(container + "." + key, "must be an object, got " + value.dump());
    }
    if (rope->contains("sliding_attention")) {
      const ConfigKeys sliding(rope->at("sliding_attention"), top.source(), container + ".sliding_attention.");
      const std::string type = sliding.string(sliding.has("rope_type") ? "rope_type" : "type").value_or("default");
      if (type != "default") sliding.fail("rope_type", "is '" + type + "'; Ferry runs plain RoPE on sliding layers");
      config.sliding_rope_theta = sliding.positive_number("rope_theta", legacy_theta);
    }
    if (!rope->contains("full_attention")) {
      config.rope_theta = legacy_theta;
      return;
    }
    rope = &rope->at("full_attention");
    container += ".full_attention";
  }
  for (const auto& [key, value] : rope->items()) {
    if (value.is_object()) {
      top.fail(container + "." + key, "is a per-layer-type rope setting, which this family does not have (one rope for all layers)");
    }
  }
  const ConfigKeys keys(*rope, top.source(), container + ".");
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
  } else if (type == "longrope" || type == "su") {  // "su": LongRoPE's older name (Phi-3's first configs)
    scaling.type = RopeScalingType::longrope;
    const auto factors = [&](const std::string& key) {
      if (!keys.has(key)) keys.fail(key, "is required for longrope: a list of rotary_dim / 2 numbers");
      const json& list = keys.object().at(key);
      std::vector<double> out;
      if (list.is_array()) {
        for (const json& value : list) {
          if (!value.is_number() || !(value.get<double>() > 0)) break;
          out.push_back(value.get<double>());
        }
      }
      if (!list.is_array() || out.size() != list.size()) keys.fail(key, "must be a list of positive numbers");
      return out;
    };
    scaling.long_factor = factors("long_factor");
    scaling.short_factor = factors("short_factor");
    // 0: absent, resolved as transformers does (ModelShape::rope_attention_scaling).
    scaling.factor = keys.has("factor") ? keys.positive_number("factor") : 0.0;
    scaling.attention_factor = keys.has("attention_factor") ? keys.positive_number("attention_factor") : 0.0;
    scaling.original_max_position_embeddings =
        keys.positive_int("original_max_position_embeddings", config.max_position_embeddings);
  } else if (type == "yarn") {
    scaling.type = RopeScalingType::yarn;
    scaling.original_max_position_embeddings =
        keys.positive_int("original_max_position_embeddings", config.max_position_embeddings);
    // Absent: max_position_embeddings / original, as transformers resolves it.
    scaling.factor = keys.has("factor") ? keys.positive_number("factor")
                                        : static_cast<double>(config.max_position_embeddings) /
                                              static_cast<double>(scaling.original_max_position_embeddings);
    scaling.attention_factor = keys.has("attention_factor") ? keys.positive_number("attention_factor") : 0.0;
    scaling.beta_fast = keys.has("beta_fast") ? keys.positive_number("beta_fast") : 32.0;
    scaling.beta_slow = keys.has("beta_slow") ? keys.positive_number("beta_slow") : 1.0;
    scaling.truncate = keys.boolean("truncate", true);
    scaling.mscale = keys.has("mscale") ? keys.positive_number("mscale") : 0.0;
    scaling.mscale_all_dim = keys.has("mscale_all_dim") ? keys.positive_number("mscale_all_dim") : 0.0;
  } else {
    keys.fail(type_key, "is '" + type +
                            "', which Ferry does not support (supported: default, linear, llama3, longrope, yarn)");
  }
  // transformers 5 keeps partial_rotary_factor in rope_parameters; there it wins over the top-level key.
  if (keys.has("partial_rotary_factor")) rope_partial_rotary_factor = keys.positive_number("partial_rotary_factor");
}

std::string read_dtype(const ConfigKeys& top) {
  const std::string key = top.has("dtype") ? "dtype" : "torch_dtype";
  const std::string dtype = top.string(key).value_or("float32");
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16" && dtype != "float64") {
    top.fail(key, "is '" + dtype + "'; expected float32, float16, bfloat16 or float64");
  }
  return dtype;
}

// "LlamaForCausalLM, ..., and their *ForSequenceClassification", for messages.
std::string supported_classes() {
  std::string out;
  for (const ModelFamily* family : model_families()) out += family->causal_lm_class + ", ";
  return out + "and their *ForSequenceClassification";
}

// `architectures` names the class transformers would build. Ferry has a causal LM and a one-output
// score head; the model family itself comes from model_type, as transformers' Auto* classes take it.
void check_architectures(const ConfigKeys& top) {
  if (!top.has("architectures")) return;
  const json& names = top.object().at("architectures");
  if (!names.is_array()) top.fail("architectures", "must be a list of class names, got " + names.dump());
  for (const json& name : names) {
    const std::string text = name.is_string() ? name.get<std::string>() : name.dump();
    if (!name.is_string() || !(text.ends_with("ForCausalLM") || text.ends_with("ForSequenceClassification"))) {
      top.fail("architectures", "names " + text + ", which Ferry does not support (supported: " +
                                    supported_classes() + ")");
    }
  }
}

}  // namespace

ModelShape parse_hf_config(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    throw ConfigError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!root.is_object()) throw ConfigError(source + ": must be a JSON object");
  const ConfigKeys top(root, source);

  ModelShape config;
  config.model_type = top.string("model_type").value_or("llama");
  const ModelFamily* found = find_family(config.model_type);
  if (found == nullptr) {
    top.fail("model_type", "is '" + config.model_type + "', which Ferry does not support (supported: " +
                               supported_model_types() + "; docs/models.md lists what each supports)");
  }
  const ModelFamily& family = *found;
  const ConfigDefaults& defaults = family.defaults;
  check_architectures(top);
  // A quantised checkpoint Ferry cannot read (fp4, 8-bit, GPTQ, ...) is refused here, before any
  // command meets its weights; bitsandbytes NF4 folders load (src/io/hf_quantization.h).
  parse_hf_quantization(json_text, source);
  if (const auto act = top.string(defaults.activation_key); act && *act != defaults.activation) {
    top.fail(defaults.activation_key, "is '" + *act + "'; " + family.name + " models use " + defaults.activation +
                                          ", and Ferry supports only that");
  }

  config.vocab_size = top.positive_int("vocab_size");
  config.hidden_size = top.positive_int("hidden_size");
  config.intermediate_size = top.positive_int("intermediate_size");
  config.num_hidden_layers = top.positive_int("num_hidden_layers");
  config.num_attention_heads = top.positive_int("num_attention_heads");
  // Absent: the family config class's default; null (and absent where the class has none):
  // num_attention_heads, no grouping.
  const int64_t default_kv_heads = top.object().contains("num_key_value_heads") || defaults.num_key_value_heads < 0
                                       ? config.num_attention_heads
                                       : defaults.num_key_value_heads;
  config.num_key_value_heads = top.positive_int("num_key_value_heads", default_kv_heads);
  if (config.num_attention_heads % config.num_key_value_heads != 0) {
    top.fail("num_key_value_heads", "(" + std::to_string(config.num_key_value_heads) + ") must divide num_attention_heads (" +
                                        std::to_string(config.num_attention_heads) + ")");
  }
  if (defaults.head_dim > 0) {
    config.head_dim = top.positive_int("head_dim", defaults.head_dim);  // the class's default, not hidden / heads
  } else {
    if (!top.has("head_dim") && config.hidden_size % config.num_attention_heads != 0) {
      top.fail("hidden_size", "(" + std::to_string(config.hidden_size) + ") is not a multiple of num_attention_heads (" +
                                  std::to_string(config.num_attention_heads) + ") and no head_dim is given");
    }
    config.head_dim = top.positive_int("head_dim", config.hidden_size / config.num_attention_heads);
  }
  config.max_position_embeddings = top.positive_int("max_position_embeddings", defaults.max_position_embeddings);
  config.rms_norm_eps = top.positive_number("rms_norm_eps", defaults.rms_norm_eps);
  config.rope_theta = defaults.rope_theta;
  double rope_partial_rotary_factor = 0;  // in rope_parameters (transformers 5), 0: not there
  read_rope(top, config, defaults.rope_per_layer_type, defaults.rope_theta, rope_partial_rotary_factor);
  if (top.has("partial_rotary_factor") || rope_partial_rotary_factor > 0) {
    config.partial_rotary_factor =
        rope_partial_rotary_factor > 0 ? rope_partial_rotary_factor : top.positive_number("partial_rotary_factor");
    if (config.partial_rotary_factor > 1 || config.rotary_dim() < 2) {
      top.fail("partial_rotary_factor", "must be in (0, 1] and leave at least 2 rotated channels");
    }
  }
  config.tie_word_embeddings = top.boolean("tie_word_embeddings", defaults.tie_word_embeddings);

  config.bos_token_id = top.token_id("bos_token_id", defaults.bos_token_id);
  config.pad_token_id = top.token_id("pad_token_id", defaults.pad_token_id);
  config.eos_token_ids.clear();
  if (!root.contains("eos_token_id")) {
    config.eos_token_ids = defaults.eos_token_ids;
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
  if (family.read_config != nullptr) family.read_config(top, config);
  return config;
}

ModelShape read_hf_config(const std::filesystem::path& config_json) {
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
  const ConfigKeys top(root, source);
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

std::string format_hf_config(const ModelShape& config, HfHead head) {
  const ModelFamily& family = family_of(config);
  if (config.has_experts() && !family.experts) {
    throw UserError("cannot write a " + family.name + " config.json for a model with experts: model_type " +
                    config.model_type + " has a dense MLP in every layer");
  }
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
    out["architectures"] = {family.score_class};
    out["id2label"] = {{"0", "LABEL_0"}};
    out["label2id"] = {{"LABEL_0", 0}};
  } else {
    out["architectures"] = {family.causal_lm_class};
  }
  out["model_type"] = family.model_types.front();
  out["vocab_size"] = config.vocab_size;
  out["hidden_size"] = config.hidden_size;
  out["intermediate_size"] = config.intermediate_size;
  out["num_hidden_layers"] = config.num_hidden_layers;
  out["num_attention_heads"] = config.num_attention_heads;
  out["num_key_value_heads"] = config.num_key_value_heads;
  if (family.defaults.has_head_dim_key || config.head_dim * config.num_attention_heads != config.hidden_size) {
    out["head_dim"] = config.head_dim;
  }
  out[family.defaults.activation_key] = config.mlp_activation == MlpActivation::gelu_tanh ? "gelu_pytorch_tanh" : "silu";
  out["max_position_embeddings"] = config.max_position_embeddings;
  out["rms_norm_eps"] = config.rms_norm_eps;
  out["initializer_range"] = 0.02;
  out["attention_dropout"] = 0.0;
  out["use_cache"] = true;
  out["tie_word_embeddings"] = config.tie_word_embeddings;
  if (config.partial_rotary_factor != 1.0) out["partial_rotary_factor"] = config.partial_rotary_factor;

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
    case RopeScalingType::longrope:
      rope["rope_type"] = "longrope";
      rope["long_factor"] = scaling.long_factor;
      rope["short_factor"] = scaling.short_factor;
      rope["original_max_position_embeddings"] = scaling.original_max_position_embeddings;
      if (scaling.factor > 0) rope["factor"] = scaling.factor;
      if (scaling.attention_factor > 0) rope["attention_factor"] = scaling.attention_factor;
      legacy_scaling = rope;  // Phi-3's config class reads rope_scaling before rope_parameters
      legacy_scaling.erase("rope_theta");
      break;
    case RopeScalingType::yarn:  // below
      break;
  }
  if (scaling.type == RopeScalingType::yarn) {
    rope["rope_type"] = "yarn";
    rope["factor"] = scaling.factor;
    rope["original_max_position_embeddings"] = scaling.original_max_position_embeddings;
    rope["beta_fast"] = scaling.beta_fast;
    rope["beta_slow"] = scaling.beta_slow;
    if (!scaling.truncate) rope["truncate"] = false;  // true is what transformers assumes
    if (scaling.attention_factor > 0) rope["attention_factor"] = scaling.attention_factor;
    if (scaling.mscale > 0) rope["mscale"] = scaling.mscale;
    if (scaling.mscale_all_dim > 0) rope["mscale_all_dim"] = scaling.mscale_all_dim;
    legacy_scaling = rope;
    legacy_scaling.erase("rope_theta");
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
  // The family's own keys last: they may refine the shared ones (Gemma 3's per-layer-type rope).
  if (family.write_config != nullptr) family.write_config(config, out);
  return out.dump(2) + "\n";
}

void write_hf_config(const std::filesystem::path& config_json, const ModelShape& config, HfHead head) {
  write_file_atomic(config_json, format_hf_config(config, head));
}

}  // namespace ferry::io
