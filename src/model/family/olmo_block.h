// What OLMo 2 and OLMo 3 share, for their descriptions (olmo2_family.cpp, olmo3_family.cpp).
#pragma once

#include <string>

#include "core/config/model_shape.h"
#include "src/model/family/model_family.h"

namespace ferry {

class ConfigKeys;

// Olmo2Config's / Olmo3Config's defaults where they differ from Llama's.
inline const ConfigDefaults kOlmoDefaults{.max_position_embeddings = 2048,
                                          .rms_norm_eps = 1e-5,
                                          .rope_theta = 10000.0,
                                          .tie_word_embeddings = false,
                                          .bos_token_id = -1,
                                          .eos_token_ids = {50279},
                                          .pad_token_id = 1,
                                          .has_head_dim_key = false};
inline ConfigDefaults olmo3_defaults() {
  ConfigDefaults defaults = kOlmoDefaults;
  defaults.rope_per_layer_type = true;
  return defaults;
}

// Post-norms, whole-projection q/k norms, no MLP bias.
void set_olmo_switches(ModelShape& config);
// The switches and attention_bias from config.json.
void set_olmo_block(const ConfigKeys& keys, ModelShape& config);
// Throws UserError (family_switches.h) unless `config` has OLMo's block.
void require_olmo_block(const ModelShape& config, const std::string& family);

}  // namespace ferry
