// The list of family descriptions and lookups in it (see model_family.h).
#include "src/model/family/model_family.h"

#include "core/error.h"
#include "src/model/family/families.h"

namespace ferry {

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> families{
      &llama_family(),  &mistral_family(), &qwen2_family(), &qwen3_family(), &gemma2_family(),
      &gemma3_family(), &smollm3_family(), &olmo2_family(), &olmo3_family(), &phi3_family(),
      &qwen3_moe_family(), &qwen2_moe_family(), &mixtral_family(), &olmoe_family(),
  };
  return families;
}

const ModelFamily* find_family(std::string_view model_type) {
  for (const ModelFamily* family : model_families()) {
    for (const std::string& type : family->model_types) {
      if (type == model_type) return family;
    }
  }
  return nullptr;
}

const ModelFamily* find_gguf_family(std::string_view architecture) {
  for (const ModelFamily* family : model_families()) {
    if (!architecture.empty() && family->gguf_architecture == architecture) return family;
  }
  return nullptr;
}

const ModelFamily& family_of(const ModelShape& config) {
  const ModelFamily* family = find_family(config.model_type);
  if (family == nullptr) {
    throw ConfigError("model_type '" + config.model_type + "' is not a model family Ferry knows (supported: " +
                      supported_model_types() + ")");
  }
  return *family;
}

std::string supported_model_types() {
  std::string out;
  for (const ModelFamily* family : model_families()) {
    for (const std::string& type : family->model_types) out += (out.empty() ? "" : ", ") + type;
  }
  return out;
}

std::string supported_gguf_architectures() {
  std::string out;
  for (const ModelFamily* family : model_families()) {
    if (family->gguf_architecture.empty() || find_gguf_family(family->gguf_architecture) != family) continue;
    out += (out.empty() ? "" : ", ") + family->gguf_architecture;
  }
  return out;
}

}  // namespace ferry
