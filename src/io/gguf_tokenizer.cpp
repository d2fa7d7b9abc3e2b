// GGUF vocabularies from SentencePiece models and byte-level BPE tokenizer.json files (see
// gguf_tokenizer.h for the rules, which follow llama.cpp's convert_hf_to_gguf.py and gguf-py's
// SpecialVocab).
#include "src/io/gguf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <array>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/file_util.h"
#include "src/io/gguf_pre_tokenizers.h"
#include "src/io/sentencepiece_model.h"

namespace ferry::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// A JSON file that may be absent (nullopt); InputError naming it when it is not valid JSON.
std::optional<json> read_json_if_present(const fs::path& file) {
  if (!fs::exists(file)) return std::nullopt;
  try {
    return json::parse(read_file(file));
  } catch (const json::exception& e) {
    throw InputError(file.string() + ": not valid JSON (" + std::string(e.what()) + ")");
  }
}

// Every `from` in `text` replaced by `to`.
std::string replaced(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  size_t start = 0;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, start)) {
    out.append(text, start, at - start).append(to);
    start = at + from.size();
  }
  return out.append(text, start, std::string::npos);
}

// "▁" (U+2581) -> " ": user-defined tokens are stored pre-normalized, as the converter does.
std::string with_spaces(const std::string& text) { return replaced(text, "\xe2\x96\x81", " "); }

// Added tokens some models do not mark special but which are control tokens (the converter's
// does_token_look_special).
bool looks_special(const std::string& text) {
  const auto wrapped = [&](const std::string& open, const std::string& close) {
    return text.size() >= open.size() + close.size() && text.starts_with(open) && text.ends_with(close);
  };
  return text == "<pad>" || text == "<mask>" || text == "<2mass>" || text == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xef\xbd\x9c", "\xef\xbd\x9c>") || wrapped("<unused", ">");
}

const std::array<const char*, 4> kSpecialKinds{"bos", "eos", "unk", "pad"};

int64_t& special_slot(GgufVocab& vocab, const std::string& kind) {
  if (kind == "bos") return vocab.bos_id;
  if (kind == "eos") return vocab.eos_id;
  if (kind == "unk") return vocab.unk_id;
  return vocab.pad_id;
}

// The text of tokenizer_config.json's `<kind>_token`, if it names one.
std::optional<std::string> special_token_text(const json& config, const std::string& kind, const fs::path& file) {
  const std::string key = kind + "_token";
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const json& entry = config[key];
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
    return entry["content"].get<std::string>();
  }
  throw InputError(file.string() + ": '" + key + "' must be a string or {\"content\": \"...\"}, got " + entry.dump());
}

// Steps 1 and 2 of the special-id rules (see gguf_tokenizer.h); `find_token` maps a text to an id.
template <class FindToken>
void read_special_ids(const fs::path& dir, const std::optional<json>& tokenizer_config, int64_t vocab_size,
                      FindToken find_token, GgufVocab& vocab) {
  const fs::path config_file = dir / "tokenizer_config.json";
  if (tokenizer_config) {
    for (const std::string kind : kSpecialKinds) {
      const std::optional<std::string> text = special_token_text(*tokenizer_config, kind, config_file);
      if (!text) continue;
      const std::optional<int64_t> id = find_token(*text);
      if (id) {
        special_slot(vocab, kind) = *id;
      } else {
        vocab.warnings.push_back(config_file.string() + ": " + kind + "_token '" + *text + "' is not a token of " +
                                 vocab.source + "; ignored");
      }
    }
  }
  const std::optional<json> model_config = read_json_if_present(dir / "config.json");
  if (!model_config) return;
  if (!model_config->is_object()) throw InputError((dir / "config.json").string() + ": must be a JSON object");
  for (const std::string kind : kSpecialKinds) {
    const std::string key = kind + "_token_id";
    if (special_slot(vocab, kind) >= 0 || !model_config->contains(key)) continue;
    json value = (*model_config)[key];
    if (value.is_array() && kind == "eos") value = value.empty() ? json(nullptr) : value[0];
    if (value.is_null()) continue;
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= vocab_size) {
      throw InputError((dir / "config.json").string() + ": '" + key + "' must be a token id in [0, " +
                       std::to_string(vocab_size) + "), got " + value.dump());
    }
    special_slot(vocab, kind) = value.get<int64_t>();
  }
}

std::string read_chat_template(const fs::path& dir, const std::optional<json>& tokenizer_config, GgufVocab& vocab) {
  const fs::path config_file = dir / "tokenizer_config.json";
  if (tokenizer_config && tokenizer_config->contains("chat_template") &&
      !(*tokenizer_config)["chat_template"].is_null()) {
    const json& entry = (*tokenizer_config)["chat_template"];
    if (entry.is_string()) return entry.get<std::string>();
    if (entry.is_array()) {
      for (const json& named : entry) {
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string()) {
          if (entry.size() > 1) {
            vocab.warnings.push_back(config_file.string() + ": only the chat template named 'default' is exported");
          }
          return named["template"].get<std::string>();
        }
      }
    }
    throw InputError(config_file.string() + ": 'chat_template' must be a string or a list of {\"name\", \"template\"} "
                     "with one named \"default\"");
  }
  if (fs::exists(dir / "chat_template.jinja")) return read_file(dir / "chat_template.jinja");
  return "";
}

std::optional<bool> config_bool(const std::optional<json>& config, const std::string& key, const fs::path& file) {
  if (!config || !config->contains(key) || (*config)[key].is_null()) return std::nullopt;
  if (!(*config)[key].is_boolean()) {
    throw InputError(file.string() + ": '" + key + "' must be true or false, got " + (*config)[key].dump());
  }
  return (*config)[key].get<bool>();
}

// --- SentencePiece ---------------------------------------------------------------------------

void set_token(GgufVocab& vocab, int64_t id, std::string text, float score, int32_t type) {
  vocab.tokens[id] = std::move(text);
  vocab.scores[id] = score;
  vocab.token_types[id] = type;
}

GgufVocab sentencepiece_vocab(const fs::path& dir, int64_t vocab_size, const std::optional<json>& tokenizer_config) {
  const fs::path file = dir / "tokenizer.model";
  const SentencePieceModel model = read_sentencepiece_model(file);
  const auto pieces = static_cast<int64_t>(model.pieces.size());
  if (pieces > vocab_size) {
    throw InputError(file.string() + " has " + std::to_string(pieces) + " pieces but config.json's vocab_size is " +
                     std::to_string(vocab_size) + ": the tokenizer does not belong to this model");
  }
  GgufVocab vocab;
  vocab.model = "llama";
  vocab.pre = "default";
  vocab.source = file.string();
  vocab.tokens.resize(vocab_size);
  vocab.scores.assign(vocab_size, -10000.0f);
  vocab.token_types.assign(vocab_size, kUnused);
  for (int64_t id = 0; id < vocab_size; ++id) vocab.tokens[id] = "[PAD" + std::to_string(id) + "]";
  for (int64_t id = 0; id < pieces; ++id) {
    const SentencePiece& piece = model.pieces[id];
    set_token(vocab, id, piece.piece, piece.score, static_cast<int32_t>(piece.type));
  }

  const auto check_id = [&](int64_t id, const std::string& where) {
    if (id < 0 || id >= vocab_size) {
      throw InputError(where + ": token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                       std::to_string(vocab_size) + ")");
    }
  };
  if (const std::optional<json> added = read_json_if_present(dir / "added_tokens.json")) {
    const std::string where = (dir / "added_tokens.json").string();
    if (!added->is_object()) throw InputError(where + ": must be an object {\"token\": id}");
    for (const auto& [text, id] : added->items()) {
      if (!id.is_number_integer()) throw InputError(where + ": '" + text + "' must map to a token id");
      check_id(id.get<int64_t>(), where);
      set_token(vocab, id.get<int64_t>(), text, -1000.0f, kUserDefined);
    }
  }
  const fs::path config_file = dir / "tokenizer_config.json";
  if (tokenizer_config && tokenizer_config->contains("added_tokens_decoder")) {
    const json& decoder = (*tokenizer_config)["added_tokens_decoder"];
    if (!decoder.is_object()) throw InputError(config_file.string() + ": 'added_tokens_decoder' must be an object");
    for (const auto& [key, token] : decoder.items()) {
      const std::string where = config_file.string() + ": added_tokens_decoder." + key;
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(key, &used);
        if (used != key.size()) id = -1;
      } catch (const std::exception&) {
      }
      if (id < 0) throw InputError(where + ": the key must be a token id");
      check_id(id, where);
      if (!token.is_object() || !token.contains("content") || !token["content"].is_string()) {
        throw InputError(where + ": needs a string 'content'");
      }
      const std::string text = token["content"].get<std::string>();
      const bool special = token.contains("special") && token["special"].is_boolean() && token["special"].get<bool>();
      if (special || looks_special(text)) {
        set_token(vocab, id, text, -1000.0f, kControl);
      } else {
        set_token(vocab, id, with_spaces(text), -1000.0f, kUserDefined);
      }
    }
  }

  read_special_ids(dir, tokenizer_config, vocab_size,
                   [&](const std::string& text) -> std::optional<int64_t> {
                     for (int64_t id = 0; id < vocab_size; ++id) {
                       if (vocab.tokens[id] == text) return id;
                     }
                     return std::nullopt;
                   },
                   vocab);
  const std::array<std::pair<int64_t*, int32_t>, 4> own{{{&vocab.unk_id, model.unk_id},
                                                         {&vocab.bos_id, model.bos_id},
                                                         {&vocab.eos_id, model.eos_id},
                                                         {&vocab.pad_id, model.pad_id}}};
  for (const auto& [slot, id] : own) {
    if (*slot < 0 && id >= 0 && id < pieces) *slot = id;
  }
  vocab.add_bos = config_bool(tokenizer_config, "add_bos_token", config_file).value_or(true);
  vocab.add_eos = config_bool(tokenizer_config, "add_eos_token", config_file).value_or(false);
  vocab.has_space_prefix_flag = true;
  vocab.add_space_prefix = model.add_dummy_prefix;
  if (model.model_type != 2) {
    const std::string kind = model.model_type == 1 ? "unigram" : "word/char";
    vocab.warnings.push_back(file.string() + " is a SentencePiece " + kind +
                             " model; llama.cpp's 'llama' tokenizer merges pieces by score (as for SentencePiece BPE), "
                             "which can split some text differently (llama.cpp's converter writes the same)");
  }
  return vocab;
}

// --- byte-level BPE --------------------------------------------------------------------------

struct Field {  // a place in tokenizer.json, for messages
  std::string file;
  std::string path;
  Field at(const std::string& key) const { return {file, path.empty() ? key : path + "." + key}; }
  Field at(size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const { throw InputError(file + ": " + path + " " + what); }
};

std::string type_of(const json& step) {
  return step.is_object() && step.contains("type") && step["type"].is_string() ? step["type"].get<std::string>() : "";
}

bool flag(const json& step, const char* key, bool fallback) {
  return step.contains(key) && step[key].is_boolean() ? step[key].get<bool>() : fallback;
}

// The pre-tokenizer steps (a Sequence's list, or the one step).
std::vector<json> pre_tokenizer_steps(const json& root) {
  if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null()) return {};
  const json& pre = root["pre_tokenizer"];
  if (type_of(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    return std::vector<json>(pre["pretokenizers"].begin(), pre["pretokenizers"].end());
  }
  return {pre};
}

// llama.cpp's name for the pre-tokenizer, or "" when it is not one Ferry recognises.
std::string recognise_pre(const std::vector<json>& steps) {
  const auto is_split = [](const json& step, const char* regex) {
    if (type_of(step) != "Split" || !step.contains("pattern") || !step["pattern"].is_object()) return false;
    const json& pattern = step["pattern"];
    return pattern.contains("Regex") && pattern["Regex"] == regex && step.value("behavior", "") == "Isolated" &&
           !flag(step, "invert", false);
  };
  const auto is_byte_level = [](const json& step, bool use_regex) {
    return type_of(step) == "ByteLevel" && flag(step, "use_regex", true) == use_regex &&
           (!use_regex || !flag(step, "add_prefix_space", true));
  };
  if (steps.size() == 2 && is_split(steps[0], kLlama3SplitRegex) && is_byte_level(steps[1], false)) return "llama-bpe";
  if (steps.size() == 2 && is_split(steps[0], kQwen2SplitRegex) && is_byte_level(steps[1], false)) return "qwen2";
  if (steps.size() == 2 && type_of(steps[0]) == "Digits" && flag(steps[0], "individual_digits", false) &&
      is_byte_level(steps[1], true)) {
    return "smollm";
  }
  if (steps.size() == 1 && is_byte_level(steps[0], true)) return "gpt-2";
  return "";
}

std::string merge_text(const json& merge, const Field& field) {
  if (merge.is_string()) return merge.get<std::string>();
  if (!merge.is_array() || merge.size() != 2 || !merge[0].is_string() || !merge[1].is_string()) {
    field.fail("must be \"a b\" or [\"a\", \"b\"], got " + merge.dump());
  }
  const auto part = [](const std::string& text) { return replaced(text, " ", "\xc4\xa0"); };  // U+0120
  return part(merge[0].get<std::string>()) + " " + part(merge[1].get<std::string>());
}

// add_bos / add_eos from a TemplateProcessing post-processor, as gguf-py's SpecialVocab reads it.
void template_flags(const json& root, const std::string& bos, const std::string& eos, bool& add_bos, bool& add_eos) {
  if (!root.contains("post_processor") || !root["post_processor"].is_object()) return;
  const json& post = root["post_processor"];
  std::vector<json> processors{post};
  if (type_of(post) == "Sequence" && post.contains("processors") && post["processors"].is_array()) {
    processors.assign(post["processors"].begin(), post["processors"].end());
  }
  const auto special_id = [](const json& item) -> std::string {
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object()) return "";
    const json& special = item["SpecialToken"];
    return special.contains("id") && special["id"].is_string() ? special["id"].get<std::string>() : "";
  };
  for (const json& processor : processors) {
    if (type_of(processor) != "TemplateProcessing" || !processor.contains("single")) continue;
    const json& single = processor["single"];
    if (!single.is_array() || single.size() < 2) continue;
    if (const std::string first = special_id(single.front()); !first.empty()) add_bos = first == bos;
    if (const std::string last = special_id(single.back()); !last.empty()) add_eos = last == eos;
  }
}

GgufVocab bpe_vocab(const fs::path& dir, int64_t vocab_size, const std::optional<json>& tokenizer_config,
                    const std::string& pre_override) {
  const fs::path file = dir / "tokenizer.json";
  const std::optional<json> parsed = read_json_if_present(file);
  FERRY_CHECK(parsed.has_value());
  const json& root = *parsed;
  const Field top{file.string(), ""};
  if (!root.is_object()) top.fail("must be a JSON object");
  if (!root.contains("model") || !root["model"].is_object()) top.at("model").fail("is missing");
  const json& model = root["model"];
  if (type_of(model) != "BPE") {
    top.at("model.type").fail("is '" + type_of(model) + "'; only BPE tokenizers can be exported to GGUF (or put the "
                              "model's SentencePiece tokenizer.model in the folder)");
  }
  const std::vector<json> steps = pre_tokenizer_steps(root);
  bool byte_level = false;
  for (const json& step : steps) byte_level = byte_level || type_of(step) == "ByteLevel";
  if (!byte_level) {
    top.at("pre_tokenizer").fail("has no ByteLevel step: only byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2 "
                                 "style) map to GGUF's gpt2 vocabulary; for a SentencePiece model, put its "
                                 "tokenizer.model in the folder");
  }

  GgufVocab vocab;
  vocab.model = "gpt2";
  vocab.source = file.string();
  vocab.tokens.assign(vocab_size, "");
  vocab.token_types.assign(vocab_size, 0);
  const auto put = [&](const Field& field, const json& id, const std::string& text, int32_t type) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      field.fail("has token id " + id.dump() + ", outside config.json's vocab_size (" + std::to_string(vocab_size) +
                 "): the tokenizer does not belong to this model");
    }
    vocab.tokens[id.get<int64_t>()] = text;
    vocab.token_types[id.get<int64_t>()] = type;
  };
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    top.at("model.vocab").fail("must be an object {token: id}");
  }
  for (const auto& [text, id] : model["vocab"].items()) put(top.at("model.vocab").at(text), id, text, kNormal);

  std::map<std::string, int64_t> added_ids;  // content -> first id, for the special-token lookup
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& added = root["added_tokens"];
    if (!added.is_array()) top.at("added_tokens").fail("must be a list");
    for (size_t i = 0; i < added.size(); ++i) {
      const Field field = top.at("added_tokens").at(i);
      const json& token = added[i];
      if (!token.is_object() || !token.contains("content") || !token["content"].is_string() || !token.contains("id")) {
        field.fail("needs 'id' and a string 'content'");
      }
      const std::string text = token["content"].get<std::string>();
      const bool special = flag(token, "special", false);
      if (special || looks_special(text)) {
        put(field, token["id"], text, kControl);
      } else {
        put(field, token["id"], with_spaces(text), kUserDefined);
      }
      added_ids.emplace(text, token["id"].get<int64_t>());
    }
  }
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (vocab.token_types[id] == 0) {
      vocab.tokens[id] = "[PAD" + std::to_string(id) + "]";
      vocab.token_types[id] = kUnused;
    }
  }

  if (!model.contains("merges") || !model["merges"].is_array()) top.at("model.merges").fail("must be a list");
  const json& merges = model["merges"];
  vocab.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    vocab.merges.push_back(merge_text(merges[i], top.at("model.merges").at(i)));
  }

  vocab.pre = pre_override.empty() ? recognise_pre(steps) : pre_override;
  if (vocab.pre.empty()) {
    const std::string shown = root["pre_tokenizer"].dump();
    throw InputError(file.string() + ": pre_tokenizer " + (shown.size() > 400 ? shown.substr(0, 400) + "..." : shown) +
                     " is not one Ferry recognises (Llama 3, Qwen2, SmolLM2 or GPT-2 style). llama.cpp splits text "
                     "with a pre-tokenizer chosen by name; pass --gguf-pre NAME with the llama.cpp name whose regex "
                     "matches this one (e.g. llama-bpe, qwen2, smollm, gpt-2; see llama-vocab.cpp)");
  }

  read_special_ids(dir, tokenizer_config, vocab_size,
                   [&](const std::string& text) -> std::optional<int64_t> {
                     const auto found = added_ids.find(text);
                     if (found != added_ids.end()) return found->second;
                     return std::nullopt;
                   },
                   vocab);
  const fs::path config_file = dir / "tokenizer_config.json";
  const std::optional<bool> add_bos = config_bool(tokenizer_config, "add_bos_token", config_file);
  const std::optional<bool> add_eos = config_bool(tokenizer_config, "add_eos_token", config_file);
  bool template_bos = false, template_eos = false;
  const auto text_of = [&](int64_t id) { return id >= 0 ? vocab.tokens[id] : std::string(); };
  template_flags(root, text_of(vocab.bos_id), text_of(vocab.eos_id), template_bos, template_eos);
  vocab.add_bos = add_bos.value_or(template_bos);
  vocab.add_eos = add_eos.value_or(template_eos);
  return vocab;
}

}  // namespace

GgufVocab read_gguf_vocab(const fs::path& model_dir, int64_t vocab_size, const std::string& pre_override) {
  FERRY_CHECK(vocab_size > 0);
  const std::optional<json> tokenizer_config = read_json_if_present(model_dir / "tokenizer_config.json");
  if (tokenizer_config && !tokenizer_config->is_object()) {
    throw InputError((model_dir / "tokenizer_config.json").string() + ": must be a JSON object");
  }
  GgufVocab vocab;
  if (fs::exists(model_dir / "tokenizer.model")) {
    vocab = sentencepiece_vocab(model_dir, vocab_size, tokenizer_config);
    if (!pre_override.empty()) vocab.warnings.push_back("--gguf-pre applies to BPE tokenizers only; ignored");
  } else if (fs::exists(model_dir / "tokenizer.json")) {
    vocab = bpe_vocab(model_dir, vocab_size, tokenizer_config, pre_override);
  } else {
    throw InputError("'" + model_dir.string() + "' has neither tokenizer.model (SentencePiece) nor tokenizer.json "
                     "(byte-level BPE); a GGUF file carries its tokenizer, so copy the model's tokenizer files into "
                     "the checkpoint folder");
  }
  vocab.chat_template = read_chat_template(model_dir, tokenizer_config, vocab);
  return vocab;
}

void add_gguf_vocab(GgufWriter& writer, const GgufVocab& vocab) {
  writer.add_string("tokenizer.ggml.model", vocab.model);
  writer.add_string("tokenizer.ggml.pre", vocab.pre);
  writer.add_string_array("tokenizer.ggml.tokens", vocab.tokens);
  if (!vocab.scores.empty()) writer.add_float32_array("tokenizer.ggml.scores", vocab.scores);
  writer.add_int32_array("tokenizer.ggml.token_type", vocab.token_types);
  if (!vocab.merges.empty()) writer.add_string_array("tokenizer.ggml.merges", vocab.merges);
  const std::array<std::pair<const char*, int64_t>, 4> ids{{{"tokenizer.ggml.bos_token_id", vocab.bos_id},
                                                            {"tokenizer.ggml.eos_token_id", vocab.eos_id},
                                                            {"tokenizer.ggml.unknown_token_id", vocab.unk_id},
                                                            {"tokenizer.ggml.padding_token_id", vocab.pad_id}}};
  for (const auto& [key, id] : ids) {
    if (id >= 0) writer.add_uint32(key, static_cast<uint32_t>(id));
  }
  writer.add_bool("tokenizer.ggml.add_bos_token", vocab.add_bos);
  writer.add_bool("tokenizer.ggml.add_eos_token", vocab.add_eos);
  if (vocab.has_space_prefix_flag) writer.add_bool("tokenizer.ggml.add_space_prefix", vocab.add_space_prefix);
  if (!vocab.chat_template.empty()) writer.add_string("tokenizer.chat_template", vocab.chat_template);
}

}  // namespace ferry::io
