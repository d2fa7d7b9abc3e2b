// Stop strings: text that ends a generated row wherever the tokenizer happens to split it — over
// several tokens, starting in the middle of one, or ending in the middle of one. generate() checks
// each row's decoded continuation after every new token and stops the row at the token that
// completes a stop string (that token still counts, like EOS); completion_of() turns a row back
// into text cut before the stop string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace at {
class Tensor;
}

namespace ferry {

class Tokenizer;
struct GenerateResult;

class StopStrings {
 public:
  StopStrings() = default;
  // Throws UserError for an empty string (it would stop every row at once). Duplicates are dropped.
  explicit StopStrings(const std::vector<std::string>& strings);

  bool empty() const { return strings_.empty(); }
  const std::vector<std::string>& strings() const { return strings_; }

  // Byte offset where the earliest stop string in `text` begins, or std::string_view::npos.
  size_t find_in(std::string_view text) const;

 private:
  std::vector<std::string> strings_;
};

// One generated row as the user sees it.
struct Completion {
  std::vector<int64_t> ids;  // new tokens in the row's mask, without a final EOS / stop id
  std::string text;          // tokenizer.decode(ids), cut before the first stop string
  bool stopped = false;      // ended by EOS, a stop id or a stop string (not by the token budget)
};

// Row `row` of `result`: its new tokens up to the end of its attention mask. `stop_ids` are the
// EOS and stop ids generate() was given.
Completion completion_of(const GenerateResult& result, int64_t row, const Tokenizer& tokenizer,
                         const std::vector<int64_t>& stop_ids, const StopStrings& stop_strings);

}  // namespace ferry
