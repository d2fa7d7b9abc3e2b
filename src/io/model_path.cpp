// Model paths: folders, GGUF files and Ollama names (see model_path.h).
#include "src/io/model_path.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <system_error>
#include <unistd.h>

#include "core/error.h"
#include "core/file_util.h"
#include "core/fnv1a.h"
#include "src/io/gguf_file.h"
#include "src/io/gguf_model.h"
#include "src/io/gguf_tokenizer_files.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_hub_cache.h"
#include "src/io/ollama_store.h"

namespace ferry::io {
namespace fs = std::filesystem;
namespace {

constexpr const char* kSourceFile = "gguf_source.json";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What identifies the GGUF file a folder was prepared from.
nlohmann::json source_of(const fs::path& file) {
  const auto modified = fs::last_write_time(file).time_since_epoch();
  return {{"file", file.string()},
          {"bytes", fs::file_size(file)},
          {"modified_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(modified).count()},
          {"format", 1}};
}

bool folder_is_current(const fs::path& folder, const nlohmann::json& source) {
  std::error_code error;
  if (!fs::exists(folder / kGgufWeightsLink, error)) return false;
  try {
    return nlohmann::json::parse(read_file(folder / kSourceFile)) == source;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

bool is_gguf_model_reference(const std::string& path) {
  return path.rfind(kOllamaPrefix, 0) == 0 || (ends_with(path, ".gguf") && !fs::is_directory(path));
}

fs::path ferry_cache_root() {
  if (const char* env = std::getenv("FERRY_CACHE"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : ".") / ".cache" / "ferry";
}

fs::path prepare_gguf_model_folder(const fs::path& gguf_file, const fs::path& cache_root) {
  std::error_code error;
  if (!fs::is_regular_file(gguf_file, error)) {
    throw InputError("GGUF model file '" + gguf_file.string() + "' does not exist or is not a file");
  }
  const fs::path file = fs::canonical(gguf_file);
  const nlohmann::json source = source_of(file);
  Fnv1a hash;
  hash.add(source.dump());
  const fs::path folder = cache_root / "gguf-models" / (file.stem().string() + "-" + hash.hex());
  if (folder_is_current(folder, source)) return folder;

  // Read and check everything first: a bad file leaves nothing behind.
  const GgufFile gguf = GgufFile::open(file);
  const GgufWeights weights(gguf);  // the config, every tensor's name, shape and type
  fs::create_directories(folder.parent_path());
  const fs::path staging = folder.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(staging, error);
  fs::create_directories(staging);
  try {
    write_hf_config(staging / "config.json", weights.config());
    write_gguf_tokenizer_files(gguf, staging);
    fs::create_symlink(file, staging / kGgufWeightsLink);
    write_file_atomic(staging / kSourceFile, source.dump(2) + "\n");
    fs::remove_all(folder, error);
    fs::rename(staging, folder, error);
    if (error) {
      // Another process prepared it at the same moment: use theirs.
      fs::remove_all(staging, error);
      if (!folder_is_current(folder, source)) {
        throw InputError("cannot prepare '" + folder.string() + "' for GGUF file '" + file.string() +
                         "'; check that the cache folder is writable (set FERRY_CACHE to move it)");
      }
    }
  } catch (...) {
    fs::remove_all(staging, error);
    throw;
  }
  return folder;
}

fs::path resolve_model_path(const std::string& path) {
  if (path.rfind(kOllamaPrefix, 0) == 0) {
    const std::string name = path.substr(std::string(kOllamaPrefix).size());
    return prepare_gguf_model_folder(ollama_model_file(name, ollama_store()), ferry_cache_root());
  }
  if (is_gguf_model_reference(path)) return prepare_gguf_model_folder(path, ferry_cache_root());
  std::error_code error;
  if (!path.empty() && !fs::exists(path, error) && looks_like_hub_repo_id(path)) {
    if (auto snapshot = find_hub_snapshot(HubRepoKind::model, path)) return *snapshot;
    std::string cached;
    for (const std::string& name : hub_cache_repos(HubRepoKind::model)) cached += (cached.empty() ? "" : ", ") + name;
    throw InputError("model '" + path + "' is not a folder here, and the Hugging Face cache does not hold it (looked in " +
                     (hub_cache_root() / ("models--" + path.substr(0, path.find('/')) + "--" +
                                          path.substr(path.find('/') + 1)))
                         .string() +
                     "; cached models: " + (cached.empty() ? "none" : cached) +
                     "). Ferry never downloads: fetch it once with `huggingface-cli download " + path +
                     "`, or give a folder, a .gguf file or ollama:NAME");
  }
  return path;
}

}  // namespace ferry::io
