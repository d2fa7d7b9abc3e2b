// The tensors of a model: every parameter of a causal LM, in execution order, with its Hugging Face
// name, llama.cpp name, shape, the config keys behind each dimension, the block it belongs to (the
// chunk unit of the offload engine) and its LoRA target. The one list: weight-shape checks, GGUF
// import and export, the chunk layout, the memory model and parameter counts all read it.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config/model_shape.h"

namespace ferry {

struct ModelTensor {
  std::string name;               // "model.layers.3.mlp.gate_proj.weight"
  std::string gguf_name;          // "blk.3.ffn_gate.weight"
  int64_t layer = -1;             // its decoder layer, -1 outside the layers
  std::string suffix;             // the name after "model.layers.<layer>." ("mlp.gate_proj.weight")
  std::vector<int64_t> shape;
  std::vector<std::string> dims;  // the config.json key(s) behind each dimension
  int64_t group = 0;              // the block that uses it: embedding_group(), layer_group(i), head_group()
  std::string lora_target;        // the projection LoRA adapts ("q_proj"), "" for none
  double gguf_offset = 0;         // llama.cpp stores this weight + offset (Gemma's norms: + 1)
  // An expert's projection: its index in the layer's stacked GGUF tensor (gguf_name names the
  // stack, ffn_gate_exps: num_experts x rows x columns), -1 for every other tensor.
  int64_t expert = -1;

  int64_t numel() const {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    return n;
  }
};

// Group indices of a model's blocks: the embedding is group 0, decoder layer i is group i+1, the
// final norm and the LM head are group num_hidden_layers + 1.
inline int64_t embedding_group() { return 0; }
inline int64_t layer_group(int64_t layer) { return layer + 1; }
inline int64_t head_group(const ModelShape& config) { return config.num_hidden_layers + 1; }

// Embedding, every layer, final norm, and lm_head unless the embeddings are tied. A layer's tensors
// follow the switches its family's description set in `config` (norm placement, biases, q/k norms).
std::vector<ModelTensor> model_tensors(const ModelShape& config);
// The tensors of decoder layer `layer` only.
std::vector<ModelTensor> layer_tensors(const ModelShape& config, int64_t layer);

// Parameter count of the backbone + LM head (tied embeddings counted once), from model_tensors.
int64_t parameter_count(const ModelShape& config);
// The parameters one token runs through: parameter_count less, in every sparse layer, the experts
// it is not routed to (num_experts - experts_per_token of them). The dense count for a dense model.
int64_t active_parameter_count(const ModelShape& config);
// The same in long double, for configs whose count overflows int64 (a hostile config.json).
long double parameter_count_unbounded(const ModelShape& config);

// The projections LoRA can adapt in this model (the lora_target values of its tensors, over its
// dense and sparse layers), in order.
std::vector<std::string> lora_targets(const ModelShape& config);

// The model's LoRA targets that lora.target_modules `wanted` names, in the model's order. On a model
// with fused projections (Phi-3) q_proj, k_proj and v_proj name qkv_proj, gate_proj and up_proj
// name gate_up_proj, so one config serves every family. Throws ConfigError for a name the model
// does not have (qkv_proj on a model with separate projections).
std::vector<std::string> resolve_lora_targets(const ModelShape& config, const std::vector<std::string>& wanted);

// Is `name` a decoder layer's query projection weight (q_proj or the fused qkv_proj): the tensor
// the planner counts a layer's attention with.
bool is_query_projection(const std::string& name);

}  // namespace ferry
