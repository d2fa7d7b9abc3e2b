// The tensor list a ModelShape implies (see model_tensors.h): one decoder layer's tensors follow
// the switches its family set (norm placement, biases, q/k norms), named as transformers and
// llama.cpp's converter name them.
#include "src/model/family/model_tensors.h"

#include <algorithm>

#include "core/error.h"

namespace ferry {
namespace {

const std::string kQueryRows = "num_attention_heads x head_dim";
const std::string kKeyValueRows = "num_key_value_heads x head_dim";

// Tensor `suffix` of decoder layer `layer`: its Hugging Face name after "model.layers.<layer>.",
// llama.cpp's after "blk.<layer>.", shape, the config keys behind each dimension, LoRA target, and
// (an expert's projection) its index in llama.cpp's stacked tensor.
ModelTensor layer_tensor(int64_t layer, const std::string& suffix, const std::string& gguf, std::vector<int64_t> shape,
                         std::vector<std::string> dims, std::string lora, int64_t expert = -1) {
  ModelTensor t;
  t.name = "model.layers." + std::to_string(layer) + "." + suffix;
  t.gguf_name = "blk." + std::to_string(layer) + "." + gguf;
  t.layer = layer;
  t.suffix = suffix;
  t.shape = std::move(shape);
  t.dims = std::move(dims);
  t.group = layer_group(layer);
  t.lora_target = std::move(lora);
  t.expert = expert;
  return t;
}

// A sparse layer's MLP (model_shape.h's MoeShape), named as transformers saves it (per expert) and
// as llama.cpp's converter stacks it: the router (ffn_gate_inp), every expert's gate/up/down
// projection (ffn_{gate,up,down}_exps, expert = its index in the stack), and Qwen2-MoE's shared
// expert with its one-row sigmoid gate (ffn_*_shexp, ffn_gate_inp_shexp).
void add_expert_tensors(const ModelShape& c, int64_t layer, std::vector<ModelTensor>& out) {
  const MoeShape& moe = c.moe;
  const bool mixtral = moe.naming == ExpertNaming::mixtral;
  const std::string block = mixtral ? "block_sparse_moe" : "mlp";
  const int64_t h = c.hidden_size, f = moe.expert_intermediate_size;
  const auto add = [&](const std::string& suffix, const std::string& gguf, std::vector<int64_t> shape,
                       std::vector<std::string> dims, std::string lora, int64_t expert) {
    out.push_back(layer_tensor(layer, suffix, gguf, std::move(shape), std::move(dims), std::move(lora), expert));
  };
  add(block + ".gate.weight", "ffn_gate_inp.weight", {moe.num_experts, h}, {"num_experts", "hidden_size"}, "gate", -1);
  const std::string width = mixtral ? "intermediate_size" : "moe_intermediate_size";
  const std::string gate = mixtral ? "w1" : "gate_proj", up = mixtral ? "w3" : "up_proj", down = mixtral ? "w2" : "down_proj";
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    const std::string expert = block + ".experts." + std::to_string(e) + ".";
    add(expert + gate + ".weight", "ffn_gate_exps.weight", {f, h}, {width, "hidden_size"}, gate, e);
    add(expert + up + ".weight", "ffn_up_exps.weight", {f, h}, {width, "hidden_size"}, up, e);
    add(expert + down + ".weight", "ffn_down_exps.weight", {h, f}, {"hidden_size", width}, down, e);
  }
  if (moe.shared_expert_intermediate_size > 0) {
    const int64_t s = moe.shared_expert_intermediate_size;
    const std::string dim = "shared_expert_intermediate_size";
    add(block + ".shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", {s, h}, {dim, "hidden_size"}, "gate_proj", -1);
    add(block + ".shared_expert.up_proj.weight", "ffn_up_shexp.weight", {s, h}, {dim, "hidden_size"}, "up_proj", -1);
    add(block + ".shared_expert.down_proj.weight", "ffn_down_shexp.weight", {h, s}, {"hidden_size", dim}, "down_proj", -1);
    add(block + ".shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", {1, h}, {"1", "hidden_size"}, "", -1);
  }
}

// The layers whose tensors stand for all others when counting: the first dense one and the first
// sparse one, each with how many layers are like it (every family's layers of one kind are alike).
std::vector<std::pair<int64_t, long double>> layer_kinds(const ModelShape& c) {
  std::vector<std::pair<int64_t, long double>> out;
  if (c.num_hidden_layers <= 0) return out;
  if (!c.has_experts() || c.moe.sparse_layers.empty()) return {{0, static_cast<long double>(c.num_hidden_layers)}};
  int64_t first_dense = -1, first_sparse = -1, sparse = 0;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_has_experts(i)) {
      ++sparse;
      if (first_sparse < 0) first_sparse = i;
    } else if (first_dense < 0) {
      first_dense = i;
    }
  }
  if (first_dense >= 0) out.emplace_back(first_dense, static_cast<long double>(c.num_hidden_layers - sparse));
  if (first_sparse >= 0) out.emplace_back(first_sparse, static_cast<long double>(sparse));
  return out;
}

long double numel(const ModelTensor& t) {
  long double n = 1;
  for (const int64_t d : t.shape) n *= static_cast<long double>(d);
  return n;
}

}  // namespace

std::vector<ModelTensor> layer_tensors(const ModelShape& c, int64_t layer) {
  const int64_t q_rows = c.num_attention_heads * c.head_dim, kv_rows = c.num_key_value_heads * c.head_dim;
  const int64_t h = c.hidden_size, f = c.intermediate_size;
  const double norm_offset = c.norm_weight == NormWeight::one_plus ? 1.0 : 0.0;
  std::vector<ModelTensor> out;
  const auto add = [&](const std::string& suffix, const std::string& gguf, std::vector<int64_t> shape,
                       std::vector<std::string> dims, std::string lora = {}) -> ModelTensor& {
    out.push_back(layer_tensor(layer, suffix, gguf, std::move(shape), std::move(dims), std::move(lora)));
    return out.back();
  };
  const auto norm = [&](const std::string& suffix, const std::string& gguf, int64_t width, const std::string& dim) {
    add(suffix, gguf, {width}, {dim}).gguf_offset = norm_offset;
  };
  const auto projection = [&](const std::string& module, const std::string& gguf, int64_t rows, int64_t columns,
                              const std::string& row_dim, const std::string& column_dim, bool bias) {
    add(module + ".weight", gguf + ".weight", {rows, columns}, {row_dim, column_dim},
        module.substr(module.rfind('.') + 1));
    if (bias) add(module + ".bias", gguf + ".bias", {rows}, {row_dim});
  };

  if (c.norm_placement != NormPlacement::post) norm("input_layernorm.weight", "attn_norm.weight", h, "hidden_size");
  if (c.fused_projections) {  // Phi-3: llama.cpp keeps them fused too
    projection("self_attn.qkv_proj", "attn_qkv", q_rows + 2 * kv_rows, h, kQueryRows + " + 2 x " + kKeyValueRows,
               "hidden_size", c.attention_bias);
  } else {
    projection("self_attn.q_proj", "attn_q", q_rows, h, kQueryRows, "hidden_size", c.attention_bias);
    projection("self_attn.k_proj", "attn_k", kv_rows, h, kKeyValueRows, "hidden_size", c.attention_bias);
    projection("self_attn.v_proj", "attn_v", kv_rows, h, kKeyValueRows, "hidden_size", c.attention_bias);
  }
  if (c.qk_norm == QkNorm::per_head) {
    norm("self_attn.q_norm.weight", "attn_q_norm.weight", c.head_dim, "head_dim");
    norm("self_attn.k_norm.weight", "attn_k_norm.weight", c.head_dim, "head_dim");
  } else if (c.qk_norm == QkNorm::whole) {
    norm("self_attn.q_norm.weight", "attn_q_norm.weight", q_rows, kQueryRows);
    norm("self_attn.k_norm.weight", "attn_k_norm.weight", kv_rows, kKeyValueRows);
  }
  projection("self_attn.o_proj", "attn_output", h, q_rows, "hidden_size", kQueryRows, c.attention_output_bias);
  switch (c.norm_placement) {
    case NormPlacement::pre:
      norm("post_attention_layernorm.weight", "ffn_norm.weight", h, "hidden_size");
      break;
    case NormPlacement::sandwich:
      norm("post_attention_layernorm.weight", "post_attention_norm.weight", h, "hidden_size");
      norm("pre_feedforward_layernorm.weight", "ffn_norm.weight", h, "hidden_size");
      break;
    case NormPlacement::post:
      norm("post_attention_layernorm.weight", "post_attention_norm.weight", h, "hidden_size");
      break;
  }
  if (c.layer_has_experts(layer)) {
    add_expert_tensors(c, layer, out);
  } else if (c.fused_projections) {  // llama.cpp's phi3 reads the fused gate and up rows as ffn_up
    projection("mlp.gate_up_proj", "ffn_up", 2 * f, h, "2 x intermediate_size", "hidden_size", c.mlp_bias);
  } else {
    projection("mlp.gate_proj", "ffn_gate", f, h, "intermediate_size", "hidden_size", c.mlp_bias);
    projection("mlp.up_proj", "ffn_up", f, h, "intermediate_size", "hidden_size", c.mlp_bias);
  }
  if (!c.layer_has_experts(layer)) {
    projection("mlp.down_proj", "ffn_down", h, f, "hidden_size", "intermediate_size", c.mlp_bias);
  }
  if (c.norm_placement != NormPlacement::pre) {
    norm("post_feedforward_layernorm.weight", "post_ffw_norm.weight", h, "hidden_size");
  }
  return out;
}

std::vector<ModelTensor> model_tensors(const ModelShape& c) {
  std::vector<ModelTensor> out;
  const auto outside = [&](std::string name, std::string gguf, std::vector<int64_t> shape,
                           std::vector<std::string> dims, int64_t group) -> ModelTensor& {
    ModelTensor t;
    t.name = std::move(name);
    t.gguf_name = std::move(gguf);
    t.shape = std::move(shape);
    t.dims = std::move(dims);
    t.group = group;
    out.push_back(std::move(t));
    return out.back();
  };
  outside("model.embed_tokens.weight", "token_embd.weight", {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"},
          embedding_group());
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    std::vector<ModelTensor> tensors = layer_tensors(c, layer);
    for (ModelTensor& t : tensors) out.push_back(std::move(t));
  }
  outside("model.norm.weight", "output_norm.weight", {c.hidden_size}, {"hidden_size"}, head_group(c)).gguf_offset =
      c.norm_weight == NormWeight::one_plus ? 1.0 : 0.0;
  if (!c.tie_word_embeddings) {
    outside("lm_head.weight", "output.weight", {c.vocab_size, c.hidden_size}, {"vocab_size", "hidden_size"},
            head_group(c));
  }
  return out;
}

namespace {

// Parameters of the backbone and head; with `active_only`, a sparse layer's experts count only
// experts_per_token times. One layer of each kind stands for the others (layer_kinds), so a hostile
// num_hidden_layers costs nothing here.
long double count_parameters(const ModelShape& c, bool active_only) {
  long double layers = 0;
  for (const auto& [layer, repeats] : layer_kinds(c)) {
    long double per_layer = 0;
    for (const ModelTensor& t : layer_tensors(c, layer)) {
      if (active_only && t.expert >= c.moe.experts_per_token) continue;
      per_layer += numel(t);
    }
    layers += per_layer * repeats;
  }
  const long double embed = static_cast<long double>(c.vocab_size) * static_cast<long double>(c.hidden_size);
  return embed * (c.tie_word_embeddings ? 1 : 2) + layers + static_cast<long double>(c.hidden_size);
}

}  // namespace

long double parameter_count_unbounded(const ModelShape& c) { return count_parameters(c, false); }

int64_t parameter_count(const ModelShape& c) { return static_cast<int64_t>(parameter_count_unbounded(c)); }

int64_t active_parameter_count(const ModelShape& c) { return static_cast<int64_t>(count_parameters(c, true)); }

std::vector<std::string> lora_targets(const ModelShape& c) {
  std::vector<std::string> out;
  for (const auto& [layer, repeats] : layer_kinds(c)) {
    for (const ModelTensor& t : layer_tensors(c, layer)) {
      if (!t.lora_target.empty() && std::find(out.begin(), out.end(), t.lora_target) == out.end()) {
        out.push_back(t.lora_target);
      }
    }
  }
  return out;
}

std::vector<std::string> resolve_lora_targets(const ModelShape& c, const std::vector<std::string>& wanted) {
  const std::vector<std::string> available = lora_targets(c);
  const auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const auto fused_name = [&](const std::string& name) -> std::string {
    if (!c.fused_projections) return name;
    if (name == "q_proj" || name == "k_proj" || name == "v_proj") return "qkv_proj";
    if (name == "gate_proj" || name == "up_proj") return "gate_up_proj";
    return name;
  };
  std::vector<std::string> named;
  for (const std::string& name : wanted) {
    if (name == "experts") {  // every expert projection (src/model/lora.h)
      if (!c.has_experts()) {
        throw ConfigError("lora.target_modules: 'experts' names the experts of a Mixture of Experts; this " +
                          c.model_type + " model has none");
      }
      named.push_back(name);
      continue;
    }
    const std::string target = fused_name(name);
    if (!has(available, target)) {
      std::string known;
      for (const std::string& t : available) known += (known.empty() ? "" : ", ") + t;
      throw ConfigError("lora.target_modules: this " + c.model_type + " model has no projection '" + name +
                        "' (its projections: " + known + ")");
    }
    named.push_back(target);
  }
  std::vector<std::string> out;
  for (const std::string& target : available) {
    if (has(named, target)) out.push_back(target);
  }
  if (has(named, "experts")) out.push_back("experts");
  return out;
}

bool is_query_projection(const std::string& name) {
  return name.ends_with(".self_attn.q_proj.weight") || name.ends_with(".self_attn.qkv_proj.weight");
}

}  // namespace ferry
