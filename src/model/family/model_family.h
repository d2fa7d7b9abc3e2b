// A model family's description: everything Ferry knows about one architecture (Llama, Qwen3,
// Gemma 3, ...) in one place. Each family is one file beside this one that fills a ModelFamily;
// `model_families()` is the one list of them. Everything else derives from a description: reading
// and writing config.json (src/io/hf_config.h), reading GGUF metadata and tensor names
// (src/io/gguf_model.h), the weight-shape checks, the chunk layout and memory model (offload/),
// parameter counts and `ferry plan`. The decoder block (src/model/decoder_layer.h) is built from
// the switches a description sets in ModelShape.
//
// Torch-free and below src/io, so the readers and the planner can use it cheaply.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

class ConfigKeys;
class GgufMetadata;

// Defaults of the config.json keys every family has, where the family's transformers config class
// differs from Llama's.
struct ConfigDefaults {
  int64_t num_key_value_heads = -1;  // -1: num_attention_heads
  int64_t head_dim = -1;             // -1: hidden_size / num_attention_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = 1;
  std::vector<int64_t> eos_token_ids{2};
  int64_t pad_token_id = -1;
  std::string activation_key = "hidden_act";  // the config.json key naming the MLP activation
  std::string activation = "silu";            // the value transformers assumes when it is absent
  bool rope_per_layer_type = false;  // rope_parameters may hold {"full_attention": ..., "sliding_attention": ...}
  bool has_head_dim_key = true;  // the config class declares head_dim (else written only when it is not hidden / heads)
};

// One GGUF metadata value a family writes beside the shared ones, key without "<architecture>.".
struct GgufKey {
  std::string key;  // "attention.sliding_window"
  enum class Type { u32, f32, bool_array } type = Type::u32;
  double value = 0;
  std::vector<bool> flags;  // bool_array
};

struct ModelFamily {
  std::string name;                      // "gemma3": what docs and messages call it
  std::vector<std::string> model_types;  // config.json model_type values it reads; the first is written
  std::string causal_lm_class;           // "Gemma3ForCausalLM": config.json's architectures for a causal LM
  std::string score_class;               // "Gemma3TextForSequenceClassification": for a reward model / critic
  std::string gguf_architecture;         // llama.cpp's general.architecture; "" when none
  bool gguf_permutes_qk = false;         // llama.cpp's llama: q/k rows in interleaved pairs (gguf_tensor_layout.h)
  ConfigDefaults defaults;
  // config.json: sets the family's switches and reads its own keys, after the shared keys are read
  // with `defaults` (src/io/hf_config.cpp). Throws ConfigError naming the key.
  void (*read_config)(const ConfigKeys& keys, ModelShape& config) = nullptr;
  // config.json: writes the family's own keys into `out` (the shared ones are written already).
  // Throws UserError when the family's config.json cannot express `config`.
  void (*write_config)(const ModelShape& config, nlohmann::json& out) = nullptr;
  // GGUF: sets the family's switches and reads its own metadata, after the shared keys are read.
  void (*read_gguf)(const GgufMetadata& metadata, ModelShape& config) = nullptr;
  // GGUF export: the family's own metadata. Throws UserError when llama.cpp's architecture cannot
  // run `config` as transformers does (llama.cpp fixes some of a family's settings in its code).
  // nullptr with a gguf_architecture: the shared keys say everything.
  std::vector<GgufKey> (*write_gguf)(const ModelShape& config) = nullptr;
  // A Mixture-of-Experts family: its config.json sets ModelShape::moe (src/model/family/moe_keys.h).
  // A dense family's writers refuse a shape with experts.
  bool experts = false;
};

// Every family Ferry reads, in the order docs list them.
const std::vector<const ModelFamily*>& model_families();

// The family whose model_types hold `model_type`, or nullptr.
const ModelFamily* find_family(std::string_view model_type);
// The family whose GGUF architecture is `architecture`, or nullptr.
const ModelFamily* find_gguf_family(std::string_view architecture);
// The family of `config` (by model_type); throws ConfigError listing the supported model_types.
const ModelFamily& family_of(const ModelShape& config);

// "llama, mistral, qwen2, ..." and "llama, qwen2, ..." for messages.
std::string supported_model_types();
std::string supported_gguf_architectures();

}  // namespace ferry
