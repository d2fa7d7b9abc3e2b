// AddedTokens: the tokenizer.json `added_tokens` (special markers such as "<|im_end|>" and plain
// added words) and the matcher that finds them in text before anything else runs, as the Rust
// library's AddedVocabulary does: leftmost-longest matches over all tokens, then per token
// `single_word` (only between non-word characters), `lstrip`/`rstrip` (the token swallows the
// whitespace beside it), and, when special tokens are to stay text, special ones skipped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

struct AddedToken {
  std::string content;
  int64_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;  // matched in normalized text (else in the original)
};

// A piece of text between matches, or one matched token; [begin, end) bytes of the text searched.
struct AddedTokenSplit {
  size_t begin = 0;
  size_t end = 0;
  const AddedToken* token = nullptr;  // null: plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what token `tokens[i]` looks like in the text searched (its normalized form
  // for a normalized token). Tokens must outlive the matcher. Empty patterns never match.
  AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns);

  bool empty() const { return tokens_.empty(); }

  // Cuts `text` into plain pieces (never empty) and tokens, appended to `out` in order.
  // `match_special` false: special tokens are not matched (they stay text).
  void split(std::string_view text, bool match_special, std::vector<AddedTokenSplit>& out) const;

 private:
  // The longest pattern starting at text[pos]: its index, or -1.
  int longest_at(std::string_view text, size_t pos, size_t* length) const;

  struct Node {
    std::vector<std::pair<unsigned char, int>> children;  // sorted by byte
    int pattern = -1;                                     // a pattern ends here
  };
  std::vector<const AddedToken*> tokens_;
  std::vector<Node> nodes_;       // a byte trie of the patterns; node 0 is the root
  bool first_byte_[256] = {};      // bytes some pattern starts with
};

}  // namespace ferry
