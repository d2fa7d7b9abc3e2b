// OLMo 2 and OLMo 3's shared switches (see olmo_block.h).
#include "src/model/family/olmo_block.h"

#include "src/model/family/config_keys.h"
#include "src/model/family/family_switches.h"

namespace ferry {

void set_olmo_switches(ModelShape& c) {
  c.norm_placement = NormPlacement::post;
  c.qk_norm = QkNorm::whole;
  c.mlp_bias = false;
}

void set_olmo_block(const ConfigKeys& keys, ModelShape& c) {
  set_olmo_switches(c);
  c.attention_bias = keys.boolean("attention_bias", false);
  c.attention_output_bias = c.attention_bias;
}

void require_olmo_block(const ModelShape& c, const std::string& family) {
  ModelShape as_llama = c;
  as_llama.norm_placement = NormPlacement::pre;
  as_llama.qk_norm = QkNorm::none;
  as_llama.sliding_rope_theta = 0;
  require_llama_block(as_llama, family);
  require_expressible(c.norm_placement == NormPlacement::post, family, "norms before attention and MLP");
  require_expressible(c.qk_norm == QkNorm::whole, family, "no q/k norms over the whole projection");
  require_expressible(!c.mlp_bias, family, "MLP biases");
  require_expressible(c.attention_bias == c.attention_output_bias, family, "q/k/v biases but no o_proj bias");
}

}  // namespace ferry
