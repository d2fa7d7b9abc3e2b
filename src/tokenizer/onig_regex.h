// OnigurumaRegex: a compiled Oniguruma regular expression, for the tokenizer.json pre-tokenizer
// patterns (Split's Regex, ByteLevel's GPT-2 pattern).
//
// Why Oniguruma: the Rust `tokenizers` library evaluates these patterns with Oniguruma (its
// `onig` crate), so using the same engine, syntax and Unicode tables gives the same pre-tokens,
// including the corners where engines differ: `\s+(?!\S)` lookahead, `(?i:'s|'t)` case folding,
// `\p{L}`/`\p{N}` property classes, and how empty matches advance. std::regex has no Unicode
// classes or lookahead, PCRE2/RE2 differ in details, and a hand-written matcher per pattern would
// not cover files we have not seen.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

typedef struct re_pattern_buffer OnigRegexType;

namespace ferry {

class OnigurumaRegex {
 public:
  // Compiles `pattern` (Oniguruma's default syntax, UTF-8, as the onig crate does). Throws
  // InputError "<where> <pattern> is not a valid regular expression (...)" on a syntax error.
  OnigurumaRegex(const std::string& pattern, const std::string& where);
  ~OnigurumaRegex();
  OnigurumaRegex(const OnigurumaRegex&) = delete;
  OnigurumaRegex& operator=(const OnigurumaRegex&) = delete;

  // Byte ranges of the successive non-overlapping matches in `text` (valid UTF-8), appended to
  // `out`, exactly as the onig crate's find_iter yields them (after a non-empty match the next
  // empty one is skipped; an empty match steps one character on). Safe to call from several
  // threads at once.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  OnigRegexType* regex_ = nullptr;
};

}  // namespace ferry
