// PreTokenizer: the tokenizer.json `pre_tokenizer` step, which cuts normalized text into the words
// BPE encodes one at a time. Supports what byte-level BPE files use: `Split` (a Regex or String
// pattern, any `behavior`, `invert`; Qwen2, Llama 3), `Digits` (SmolLM2) and `ByteLevel`
// (`add_prefix_space`, `use_regex` with GPT-2's pattern), alone or in a `Sequence` whose last
// step is the ByteLevel one (it turns the words into bytes, so nothing may split after it).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry {

struct JsonField;
class OnigurumaRegex;

// One word: bytes [begin, end) of the normalized text, after a space ByteLevel prepended when
// `prefix_space` (that space stands for the same original bytes as the word's first character).
struct PreToken {
  size_t begin = 0;
  size_t end = 0;
  bool prefix_space = false;
};

class PreTokenizer {
 public:
  PreTokenizer();  // empty: encodes nothing (from_json makes a real one)
  // From tokenizer.json's `pre_tokenizer`. InputError for other types, or without ByteLevel.
  static PreTokenizer from_json(const nlohmann::json& pre_tokenizer, const JsonField& field);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the words of `text` (one normalized piece between added tokens) to `out`, in order.
  // Empty words are dropped, as the Rust library drops empty splits.
  void split(std::string_view text, std::vector<PreToken>& out) const;

 private:

  enum class Behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  struct SplitStep {
    std::unique_ptr<OnigurumaRegex> regex;  // a Regex pattern
    std::string literal;                    // a String pattern
    bool digits = false;                    // Digits: each numeric character is a match
    Behavior behavior = Behavior::isolated;
    bool invert = false;
  };

  static void parse(const nlohmann::json& j, const JsonField& field, PreTokenizer& out, bool last);
  // Splits text[begin, end) with one step; appends the resulting [begin, end) ranges.
  static void apply(const SplitStep& step, std::string_view text, size_t begin, size_t end,
                    std::vector<std::pair<size_t, size_t>>& out);

  std::vector<SplitStep> steps_;
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
  std::unique_ptr<SplitStep> byte_level_regex_;  // GPT-2's pattern when use_regex
};

}  // namespace ferry
