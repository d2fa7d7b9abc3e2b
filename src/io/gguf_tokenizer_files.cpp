// Hugging Face tokenizer files from a GGUF vocabulary (see gguf_tokenizer_files.h).
#include "src/io/gguf_tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <map>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/gguf_pre_tokenizers.h"
#include "src/io/sentencepiece_model.h"
#include "src/tokenizer/byte_level.h"

namespace ferry::io {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const char* const kGgufPreTokenizers =
    "llama-bpe, llama3, llama-v3, falcon3, pixtral, smaug-bpe, dbrx, qwen2, deepseek-r1-qwen, megrez, smollm, gpt-2, "
    "default";

namespace {

// `value` as JSON text; an InputError naming the metadata it came from when a string there is not
// valid UTF-8 (JSON cannot hold it; a corrupt file, or bytes a writer should have escaped).
std::string json_text(const GgufFile& file, const json& value, int indent, const char* keys) {
  try {
    return value.dump(indent) + "\n";
  } catch (const json::type_error& e) {
    throw InputError(file.describe() + ": metadata " + keys + " holds text that is not valid UTF-8 (" + e.what() +
                     "); the file is corrupt");
  }
}

// llama.cpp's token types are SentencePiece's piece types (sentencepiece_model.h).
constexpr int64_t kNormal = static_cast<int64_t>(PieceType::normal);
constexpr int64_t kControl = static_cast<int64_t>(PieceType::control);
constexpr int64_t kUserDefined = static_cast<int64_t>(PieceType::user_defined);
constexpr int64_t kByte = static_cast<int64_t>(PieceType::byte);

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

json split_then_bytes(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({json{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                        byte_level(false)})}};
}

json pre_tokenizer_for(const GgufFile& file, const std::string& pre) {
  static const std::map<std::string, const char*> splits = {
      {"llama-bpe", kLlama3SplitRegex}, {"llama3", kLlama3SplitRegex},  {"llama-v3", kLlama3SplitRegex},
      {"falcon3", kLlama3SplitRegex},   {"pixtral", kLlama3SplitRegex}, {"smaug-bpe", kLlama3SplitRegex},
      {"dbrx", kLlama3SplitRegex},      {"qwen2", kQwen2SplitRegex},    {"deepseek-r1-qwen", kQwen2SplitRegex},
      {"megrez", kQwen2SplitRegex}};
  if (const auto it = splits.find(pre); it != splits.end()) return split_then_bytes(it->second);
  if (pre == "smollm") {
    return {{"type", "Sequence"},
            {"pretokenizers", json::array({json{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)})}};
  }
  if (pre == "gpt-2" || pre == "default") return byte_level(true);
  throw InputError(file.describe() + ": metadata 'tokenizer.ggml.pre' is '" + pre +
                   "', a pre-tokenizer Ferry does not map (it maps " + kGgufPreTokenizers +
                   "); a wrong guess would tokenize wrongly, so convert the model from its Hugging Face folder instead");
}

// The text of token `id`, or "" when the file has no such id.
std::string token_text(const std::vector<std::string>& tokens, int64_t id) {
  return id >= 0 && id < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(id)] : std::string();
}

std::vector<int64_t> token_types(const GgufFile& file, size_t count) {
  std::vector<int64_t> types(count, kNormal);
  if (!file.has("tokenizer.ggml.token_type")) return types;
  const std::vector<double>& raw = file.get_numbers("tokenizer.ggml.token_type");
  if (raw.size() != count) {
    throw InputError(file.describe() + ": metadata 'tokenizer.ggml.token_type' has " + std::to_string(raw.size()) +
                     " entries for " + std::to_string(count) + " tokens; the file is corrupt");
  }
  for (size_t i = 0; i < count; ++i) {
    types[i] = static_cast<int64_t>(raw[i]);
    if (types[i] < kNormal || types[i] > kByte) {
      throw InputError(file.describe() + ": metadata 'tokenizer.ggml.token_type' entry " + std::to_string(i) + " is " +
                       std::to_string(types[i]) + " (1 to 6 expected); the file is corrupt");
    }
  }
  return types;
}

void write_byte_level_bpe(const GgufFile& file, const std::vector<std::string>& tokens,
                          const std::vector<int64_t>& types, const fs::path& folder) {
  json vocab = json::object();
  json added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    const std::string& token = tokens[id];
    const bool spelled = byte_level::decode(token).has_value();
    const bool control = types[id] == kControl && spelled;  // transformers skips mislabelled ones
    const bool added_token = control || types[id] == kUserDefined;
    // An added token keeps its text (the tokenizers library wants an added token's content at its
    // id); any other token outside the byte alphabet is respelled from its UTF-8 bytes, as
    // transformers does.
    const std::string key = spelled || added_token ? token : byte_level::encode(token);
    if (vocab.contains(key)) {
      throw InputError(file.describe() + ": metadata 'tokenizer.ggml.tokens' lists '" + token + "' twice (ids " +
                       std::to_string(vocab[key].get<int64_t>()) + " and " + std::to_string(id) + "); the file is corrupt");
    }
    vocab[key] = id;
    if (added_token) {
      added.push_back({{"id", id}, {"content", token}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", control}});
    }
  }
  json merges = json::array();
  if (file.has("tokenizer.ggml.merges")) {
    for (const std::string& merge : file.get_strings("tokenizer.ggml.merges")) merges.push_back(merge);
  }
  const json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", pre_tokenizer_for(file, file.get_string("tokenizer.ggml.pre", "default"))},
      {"post_processor", byte_level(true)},
      {"decoder", byte_level(true)},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merges}}},
  };
  write_file_atomic(folder / "tokenizer.json",
                    json_text(file, tokenizer, 1, "'tokenizer.ggml.tokens' or 'tokenizer.ggml.merges'"));
}

void write_sentencepiece(const GgufFile& file, const std::vector<std::string>& tokens,
                         const std::vector<int64_t>& types, const fs::path& folder) {
  SentencePieceModel model;
  model.model_type = 2;  // BPE
  model.byte_fallback = false;
  std::vector<double> scores(tokens.size(), 0.0);
  if (file.has("tokenizer.ggml.scores")) {
    scores = file.get_numbers("tokenizer.ggml.scores");
    if (scores.size() != tokens.size()) {
      throw InputError(file.describe() + ": metadata 'tokenizer.ggml.scores' has " + std::to_string(scores.size()) +
                       " entries for " + std::to_string(tokens.size()) + " tokens; the file is corrupt");
    }
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    model.pieces.push_back({tokens[id], static_cast<float>(scores[id]), static_cast<PieceType>(types[id])});
    if (types[id] == kByte) model.byte_fallback = true;
  }
  model.unk_id = static_cast<int32_t>(file.get_int("tokenizer.ggml.unknown_token_id", -1));
  model.bos_id = static_cast<int32_t>(file.get_int("tokenizer.ggml.bos_token_id", -1));
  model.eos_id = static_cast<int32_t>(file.get_int("tokenizer.ggml.eos_token_id", -1));
  model.pad_id = static_cast<int32_t>(file.get_int("tokenizer.ggml.padding_token_id", -1));
  if (model.unk_id < 0 || model.unk_id >= static_cast<int32_t>(model.pieces.size())) {
    throw InputError(file.describe() + ": a SentencePiece (\"llama\") vocabulary needs 'tokenizer.ggml.unknown_token_id' "
                     "within its tokens");
  }
  // SentencePiece needs its unk piece typed UNKNOWN; Gemma's GGUF files type <unk> as a control token.
  model.pieces[static_cast<size_t>(model.unk_id)].type = PieceType::unknown;
  model.add_dummy_prefix = file.get_bool("tokenizer.ggml.add_space_prefix", true);
  model.remove_extra_whitespaces = false;
  write_file_atomic(folder / "tokenizer.model", format_sentencepiece_model(model));
}

}  // namespace

void write_gguf_tokenizer_files(const GgufFile& file, const fs::path& folder) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  const std::vector<std::string>& tokens = file.get_strings("tokenizer.ggml.tokens");
  if (tokens.empty()) throw InputError(file.describe() + ": metadata 'tokenizer.ggml.tokens' is empty");
  const std::vector<int64_t> types = token_types(file, tokens.size());
  if (model == "gpt2") {
    write_byte_level_bpe(file, tokens, types, folder);
  } else if (model == "llama") {
    write_sentencepiece(file, tokens, types, folder);
  } else {
    throw InputError(file.describe() + ": metadata 'tokenizer.ggml.model' is '" + model +
                     "'; Ferry reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) vocabularies");
  }

  json config = json::object();
  const auto special = [&](const char* name, const char* key) {
    const int64_t id = file.get_int(std::string("tokenizer.ggml.") + key, -1);
    if (id < 0) return;
    if (id >= static_cast<int64_t>(tokens.size())) {
      throw InputError(file.describe() + ": metadata 'tokenizer.ggml." + key + "' = " + std::to_string(id) +
                       " is outside the " + std::to_string(tokens.size()) + " tokens; the file is corrupt");
    }
    config[name] = token_text(tokens, id);
  };
  special("bos_token", "bos_token_id");
  special("eos_token", "eos_token_id");
  special("unk_token", "unknown_token_id");
  special("pad_token", "padding_token_id");
  config["add_bos_token"] = file.get_bool("tokenizer.ggml.add_bos_token", model == "llama");
  config["add_eos_token"] = file.get_bool("tokenizer.ggml.add_eos_token", false);
  if (file.has("tokenizer.chat_template")) config["chat_template"] = file.get_string("tokenizer.chat_template");
  write_file_atomic(folder / "tokenizer_config.json",
                    json_text(file, config, 2, "'tokenizer.chat_template' or a special token's text"));
}

}  // namespace ferry::io
