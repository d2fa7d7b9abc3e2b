// Resolving a model name through Ollama's store (see ollama_store.h).
#include "src/io/ollama_store.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/text.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

constexpr const char* kRegistry = "registry.ollama.ai";
constexpr const char* kModelMediaType = "application/vnd.ollama.image.model";

// "host/namespace/model:tag" with Ollama's defaults filled in, as path parts.
std::vector<std::string> manifest_parts(const std::string& name) {
  std::string model = name, tag = "latest";
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && name.find('/', colon) == std::string::npos) {
    model = name.substr(0, colon);
    tag = name.substr(colon + 1);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = model.find('/', start);
    parts.push_back(model.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (const std::string& part : parts) {
    if (part.empty() || part == "." || part == "..") {
      throw InputError("'ollama:" + name + "' is not an Ollama model name (expected NAME, NAME:TAG or NAMESPACE/NAME:TAG)");
    }
  }
  if (tag.empty() || tag.find('/') != std::string::npos || tag == "." || tag == "..") {
    throw InputError("'ollama:" + name + "' has an empty or malformed tag");
  }
  if (parts.size() == 1) parts.insert(parts.begin(), "library");
  if (parts.size() == 2) parts.insert(parts.begin(), kRegistry);
  parts.push_back(tag);
  return parts;
}

// The model names the store holds ("smollm2:135m"), for the message of a missing one.
std::vector<std::string> store_models(const fs::path& store) {
  std::vector<std::string> names;
  const fs::path root = store / "manifests";
  std::error_code error;
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const fs::path relative = fs::relative(it->path(), root, error);
    std::vector<std::string> parts;
    for (const auto& part : relative) parts.push_back(part.string());
    if (parts.size() < 3) continue;
    std::string model;
    const size_t first = parts[0] == kRegistry ? (parts[1] == "library" ? 2 : 1) : 0;
    for (size_t i = first; i + 1 < parts.size(); ++i) model += (model.empty() ? "" : "/") + parts[i];
    names.push_back(model + ":" + parts.back());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

fs::path ollama_store() {
  if (const char* env = std::getenv("OLLAMA_MODELS"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : ".") / ".ollama" / "models";
}

fs::path ollama_model_file(const std::string& name, const fs::path& store) {
  if (!fs::is_directory(store)) {
    throw InputError("no Ollama model store at '" + store.string() + "' (for 'ollama:" + name +
                     "'); set OLLAMA_MODELS to the folder Ollama keeps its models in, or pull the model with `ollama pull " +
                     name + "`");
  }
  fs::path manifest = store / "manifests";
  for (const std::string& part : manifest_parts(name)) manifest /= part;
  if (!fs::is_regular_file(manifest)) {
    const std::vector<std::string> models = store_models(store);
    throw InputError("Ollama's store '" + store.string() + "' has no model '" + name + "' (no " + manifest.string() +
                     "); it has: " + (models.empty() ? std::string("nothing") : join(models, ", ")) +
                     ". Pull it with `ollama pull " + name + "` or name one of these");
  }
  const std::string source = "Ollama manifest '" + manifest.string() + "'";
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(read_file(manifest));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source + " is not valid JSON (" + e.what() + "); pull the model again");
  }
  if (!root.is_object() || !root.contains("layers") || !root["layers"].is_array()) {
    throw InputError(source + ": key 'layers' is missing or not a list; pull the model again");
  }
  for (size_t i = 0; i < root["layers"].size(); ++i) {
    const nlohmann::json& layer = root["layers"][i];
    const std::string where = source + ": layers[" + std::to_string(i) + "]";
    if (!layer.is_object() || !layer.contains("mediaType") || !layer["mediaType"].is_string()) {
      throw InputError(where + " has no string 'mediaType'; pull the model again");
    }
    if (layer["mediaType"] != kModelMediaType) continue;
    if (!layer.contains("digest") || !layer["digest"].is_string()) {
      throw InputError(where + " has no string 'digest'; pull the model again");
    }
    const std::string digest = layer["digest"];
    const size_t colon = digest.find(':');
    const std::string hex = colon == std::string::npos ? std::string() : digest.substr(colon + 1);
    const bool hex_ok = digest.rfind("sha256:", 0) == 0 && hex.size() == 64 &&
                        hex.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex_ok) throw InputError(where + ": 'digest' '" + digest + "' is not sha256:<64 hex digits>; pull the model again");
    for (const std::string& file : {"sha256-" + hex, "sha256:" + hex}) {
      const fs::path blob = store / "blobs" / file;
      if (!fs::is_regular_file(blob)) continue;
      if (layer.contains("size") && layer["size"].is_number_unsigned() &&
          layer["size"].get<uint64_t>() != fs::file_size(blob)) {
        throw InputError("Ollama blob '" + blob.string() + "' has " + std::to_string(fs::file_size(blob)) +
                         " bytes but " + source + " says " + std::to_string(layer["size"].get<uint64_t>()) +
                         "; the download is incomplete — pull the model again");
      }
      return blob;
    }
    throw InputError(source + " names blob " + digest + ", which is not in '" + (store / "blobs").string() +
                     "'; pull the model again");
  }
  throw InputError(source + " has no layer of type " + kModelMediaType + " (a model's weights); pull the model again");
}

}  // namespace ferry::io
