// A small GPT-2-style tokenizer.json for tests that need a byte-level BPE tokenizer without a
// fixture file.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "src/tokenizer/byte_level.h"

namespace ferry {

// A GPT-2-style tokenizer.json: the 256 byte pieces (ids = byte values), "he" 256, "Ġt" 257,
// "Ġthe" 258, and the special <|end|> 259.
inline nlohmann::json small_bpe_tokenizer_json() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(byte_level::char_of(static_cast<unsigned char>(b)))] = b;
  vocab["he"] = 256;
  vocab["Ġt"] = 257;
  vocab["Ġthe"] = 258;
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", json::array({{{"id", 259}, {"content", "<|end|>"}, {"single_word", false}, {"lstrip", false},
                                     {"rstrip", false}, {"normalized", false}, {"special", true}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", json::array({json::array({"h", "e"}), "Ġ t", json::array({"Ġt", "he"})})}}},
  };
}

}  // namespace ferry
