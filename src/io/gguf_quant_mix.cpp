// llama-quantize's per-tensor types (see gguf_quant_mix.h), written in the order of
// llama-quant.cpp so each rule can be read against it.
#include "src/io/gguf_quant_mix.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/error.h"

namespace ferry::io {
namespace {

enum class Category { token_embd, attn_q, attn_v, attn_k, attn_qkv, attn_kv_b, attn_output, ffn_up, ffn_gate, ffn_down, output, other };

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// tensor_get_category.
Category category_of(const std::string& name) {
  if (name == "output.weight") return Category::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::token_embd;
  if (contains(name, "attn_qkv.weight")) return Category::attn_qkv;
  if (contains(name, "attn_kv_b.weight")) return Category::attn_kv_b;
  if (contains(name, "attn_v.weight")) return Category::attn_v;
  if (contains(name, "attn_k.weight")) return Category::attn_k;
  if (contains(name, "attn_q.weight")) return Category::attn_q;
  if (contains(name, "attn_output.weight")) return Category::attn_output;
  if (contains(name, "ffn_up")) return Category::ffn_up;
  if (contains(name, "ffn_gate")) return Category::ffn_gate;
  if (contains(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

bool is_attn_v_like(Category c) { return c == Category::attn_v || c == Category::attn_qkv || c == Category::attn_kv_b; }

// ggml_n_dims: the dimensions up to the last one above 1 (torch order: leading 1s dropped).
size_t ggml_dims(const std::vector<int64_t>& shape) {
  size_t first = 0;
  while (first + 1 < shape.size() && shape[first] == 1) ++first;
  return shape.size() - first;
}

// tensor_allows_quantization, the rules that can apply to a decoder's tensors.
bool allows_quantization(const GgufQuantTensor& t) {
  if (ggml_dims(t.shape) < 2) return false;
  const std::string& name = t.name;
  if (!name.ends_with("weight")) return false;
  for (const char* kept : {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
                           "ssm_conv1d", "attn_rel_b.weight", ".position_embd", ".patch_embd"}) {
    if (contains(name, kept)) return false;
  }
  return name != "position_embd.weight" && name != "token_types.weight";
}

// The block index in "blk.N.", -1 for the file's other tensors (weight_name_comparer's sscanf).
int block_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

GgmlType default_type(GgufFileType file_type) {
  switch (file_type) {
    case GgufFileType::q4_0: return GgmlType::q4_0;
    case GgufFileType::q5_0: return GgmlType::q5_0;
    case GgufFileType::q4_k_s:
    case GgufFileType::q4_k_m: return GgmlType::q4_k;
    case GgufFileType::q5_k_m: return GgmlType::q5_k;
    case GgufFileType::q6_k: return GgmlType::q6_k;
    default: break;
  }
  FERRY_CHECK(false, "gguf_quant_mix_types: ", gguf_file_type_name(file_type), " is a converter type");
  return GgmlType::f32;
}

int64_t block_elements(GgmlType type) { return ggml_type_traits(type).block_elements; }

bool use_more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// tensor_type_fallback: a type whose block does not divide the rows.
GgmlType fallback(GgmlType type, int64_t columns) {
  if (columns % block_elements(type) == 0) return type;
  GgmlType out = type;
  switch (type) {
    case GgmlType::q4_k: out = GgmlType::q5_0; break;
    case GgmlType::q5_k: out = GgmlType::q5_1; break;
    case GgmlType::q6_k: out = GgmlType::q8_0; break;
    default: break;  // a 32-value type: no smaller block; F16 below
  }
  return columns % block_elements(out) == 0 ? out : GgmlType::f16;
}

}  // namespace

std::vector<GgmlType> gguf_quant_mix_types(GgufFileType file_type, const GgufQuantModel& model,
                                           const std::vector<GgufQuantTensor>& tensors) {
  const GgmlType base = default_type(file_type);
  const bool tied = std::none_of(tensors.begin(), tensors.end(), [](const auto& t) { return t.name == "output.weight"; });
  // LLM_TYPE_70B (llama: 80 layers with grouped KV heads; qwen2: 80 layers).
  const bool is_70b = model.layers == 80 && ((model.architecture == "llama" && model.heads != model.kv_heads) ||
                                             model.architecture == "qwen2");

  // llama.cpp visits tensors in its loader's order (block index, then name; -1 before the blocks),
  // and counts attn_v-like tensors as it goes.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int la = block_of(tensors[a].name), lb = block_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  int64_t n_attention_wv = 0;
  for (const auto& t : tensors) n_attention_wv += is_attn_v_like(category_of(t.name)) ? 1 : 0;
  const int64_t n_ffn_down = model.layers;
  int64_t i_attention_wv = 0;
  int64_t i_ffn_down = 0;

  std::vector<GgmlType> types(tensors.size(), GgmlType::f32);
  for (const size_t index : order) {
    const GgufQuantTensor& tensor = tensors[index];
    if (!allows_quantization(tensor)) continue;  // F32, as in the file llama.cpp reads
    const Category category = category_of(tensor.name);
    const int64_t columns = tensor.shape.back();
    GgmlType type = base;
    if (category == Category::output || (tied && category == Category::token_embd)) {
      if (columns % block_elements(base) != 0) {
        type = GgmlType::q8_0;
      } else if (type != GgmlType::q8_0) {
        type = GgmlType::q6_k;
      }
    } else if (category == Category::token_embd) {
      // untied: the default type
    } else if (is_attn_v_like(category)) {
      if ((file_type == GgufFileType::q4_k_m || file_type == GgufFileType::q5_k_m) &&
          use_more_bits(i_attention_wv, n_attention_wv)) {
        type = GgmlType::q6_k;
      } else if (file_type == GgufFileType::q4_k_s && i_attention_wv < 4) {
        type = GgmlType::q5_k;
      }
      if (is_70b && (type == GgmlType::q3_k || type == GgmlType::q4_k)) type = GgmlType::q5_k;
      if (model.experts == 8) type = GgmlType::q8_0;  // "for the 8-expert model, bumping this to Q8_0"
      ++i_attention_wv;
    } else if (category == Category::attn_k) {
      if (model.experts == 8) type = GgmlType::q8_0;
    } else if (category == Category::attn_output) {
      if (model.experts == 8 && (file_type == GgufFileType::q4_k_s || file_type == GgufFileType::q4_k_m)) {
        type = GgmlType::q5_k;
      }
    } else if (category == Category::ffn_down) {
      // Dense: the counter; with experts llama.cpp reads the layer from the name (layer_info).
      const int64_t layer = model.experts > 1 ? block_of(tensor.name) : i_ffn_down;
      if (file_type == GgufFileType::q4_k_m && use_more_bits(layer, n_ffn_down)) {
        type = GgmlType::q6_k;
      } else if (file_type == GgufFileType::q5_k_m && use_more_bits(layer, n_ffn_down)) {
        type = GgmlType::q6_k;
      } else if (file_type == GgufFileType::q4_k_s && layer < n_ffn_down / 8) {
        type = GgmlType::q5_k;
      }
      ++i_ffn_down;
    }
    types[index] = fallback(type, columns);
  }
  return types;
}

}  // namespace ferry::io
