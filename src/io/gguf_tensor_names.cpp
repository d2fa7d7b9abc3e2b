// llama.cpp's tensor names and Q/K row order (see gguf_tensor_names.h).
#include "src/io/gguf_tensor_names.h"

#include <map>

namespace ferry::io {

std::string gguf_tensor_name(const HfTensorSpec& spec) {
  static const std::map<std::string, std::string> global = {{"model.embed_tokens.weight", "token_embd.weight"},
                                                            {"model.norm.weight", "output_norm.weight"},
                                                            {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> module = {
      {"input_layernorm", "attn_norm"}, {"self_attn.q_proj", "attn_q"},   {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},   {"self_attn.q_norm", "attn_q_norm"}, {"self_attn.k_norm", "attn_k_norm"},
      {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},        {"mlp.down_proj", "ffn_down"}};
  if (spec.layer < 0) return global.at(spec.name);
  const size_t dot = spec.suffix.rfind('.');  // "...q_proj" + ".weight" / ".bias"
  return "blk." + std::to_string(spec.layer) + "." + module.at(spec.suffix.substr(0, dot)) + spec.suffix.substr(dot);
}

RowPermutation gguf_row_permutation(const HfTensorSpec& spec, const std::string& architecture) {
  if (architecture != "llama") return RowPermutation::none;
  if (spec.suffix.rfind("self_attn.q_proj.", 0) == 0) return RowPermutation::query;
  if (spec.suffix.rfind("self_attn.k_proj.", 0) == 0) return RowPermutation::key;
  return RowPermutation::none;
}

namespace {

at::Tensor swap_halves(const at::Tensor& w, int64_t groups, bool to_gguf) {
  const std::vector<int64_t> sizes = w.sizes().vec();
  const int64_t half = w.size(0) / groups / 2;
  std::vector<int64_t> split{groups, to_gguf ? 2 : half, to_gguf ? half : 2};
  split.insert(split.end(), sizes.begin() + 1, sizes.end());
  return w.reshape(split).transpose(1, 2).reshape(sizes).contiguous();
}

}  // namespace

at::Tensor permute_rows_to_gguf(const at::Tensor& w, int64_t groups) { return swap_halves(w, groups, true); }
at::Tensor permute_rows_from_gguf(const at::Tensor& w, int64_t groups) { return swap_halves(w, groups, false); }

}  // namespace ferry::io
