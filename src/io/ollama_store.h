// Models in Ollama's local store, named as `ollama run` names them ("smollm2", "smollm2:135m",
// "library/qwen2.5:0.5b", "hf.co/user/repo:Q4_K_M"). The store is $OLLAMA_MODELS, else
// ~/.ollama/models:
//   manifests/<host>/<namespace>/<model>/<tag>   (host registry.ollama.ai, namespace library and
//                                                  tag latest unless the name gives them)
//   blobs/sha256-<hex>                             (older stores: sha256:<hex>)
// A manifest is JSON: {"layers": [{"mediaType": "application/vnd.ollama.image.model",
// "digest": "sha256:<hex>", "size": <bytes>}, ...]}; the model layer's blob is a GGUF file.
#pragma once

#include <filesystem>
#include <string>

namespace ferry::io {

inline constexpr const char* kOllamaPrefix = "ollama:";

// The store Ollama uses on this machine ($OLLAMA_MODELS, else ~/.ollama/models).
std::filesystem::path ollama_store();

// The GGUF blob of model `name` ("smollm2:135m", without the "ollama:" prefix) in `store`.
// Throws InputError when the store, the model or its blob is missing (listing the models the store
// has) or the manifest is malformed (naming the file and key).
std::filesystem::path ollama_model_file(const std::string& name, const std::filesystem::path& store);

}  // namespace ferry::io
