// A model as users name it — `model.path`, `--model` — resolved to the Hugging Face model folder
// Ferry reads:
//   a folder                 itself (config.json, safetensors, tokenizer files)
//   a file ending in .gguf   a folder prepared for it (below)
//   ollama:NAME[:TAG]        the GGUF blob of that model in Ollama's store (ollama_store.h),
//                            then as a .gguf file
//   ORG/NAME                 (when no such folder exists here) the newest snapshot of that model
//                            in the local Hugging Face hub cache (hf_hub_cache.h), offline
// A GGUF model's folder lives in the cache, `$FERRY_CACHE/gguf-models/<file stem>-<fingerprint>`
// (FERRY_CACHE defaults to ~/.cache/ferry), and holds only small files: config.json
// (gguf_model.h), the tokenizer files (gguf_tokenizer_files.h) and `model.gguf`, a link to the
// GGUF file, from which the weights are read and converted as they are loaded (hf_checkpoint.h).
// The fingerprint covers the file's path, size and modification time, so a changed file gets a new
// folder; the folder is written under a temporary name and renamed into place.
#pragma once

#include <filesystem>
#include <string>

namespace ferry::io {

// True for a path resolve_model_path prepares a folder for (".gguf" or "ollama:").
bool is_gguf_model_reference(const std::string& path);

// The folder to read for `path` (see above). Folders and other paths come back unchanged (the
// loaders report a missing folder). Throws InputError for a bad GGUF file or Ollama name, and for
// an ORG/NAME the hub cache does not hold (naming where it looked).
std::filesystem::path resolve_model_path(const std::string& path);

// The folder prepared for the GGUF file `gguf_file` under `cache_root`/gguf-models.
std::filesystem::path prepare_gguf_model_folder(const std::filesystem::path& gguf_file,
                                                const std::filesystem::path& cache_root);

// $FERRY_CACHE, else ~/.cache/ferry.
std::filesystem::path ferry_cache_root();

}  // namespace ferry::io
