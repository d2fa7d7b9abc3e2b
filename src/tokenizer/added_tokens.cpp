// AddedTokens: leftmost-longest matching of added tokens with the Rust library's options.
#include "src/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

// Rust regex `\s*$` on text[..end]: where the whitespace that ends it starts.
size_t whitespace_run_before(std::string_view text, size_t end) {
  while (end > 0) {
    size_t length = 0;
    const char32_t c = utf8::decode_before(text, end, &length);
    if (!utf8::is_white_space(c)) break;
    end -= length;
  }
  return end;
}

// Rust regex `^\s*` on text[begin..]: where the whitespace that starts it ends.
size_t whitespace_run_after(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t length = 0;
    if (!utf8::is_white_space(utf8::decode(text, begin, &length))) break;
    begin += length;
  }
  return begin;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), nodes_(1) {
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string& pattern = patterns[i];
    if (pattern.empty()) continue;
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
    int node = 0;
    for (const char ch : pattern) {
      const auto byte = static_cast<unsigned char>(ch);
      auto& children = nodes_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
      if (it == children.end() || it->first != byte) {
        const int created = static_cast<int>(nodes_.size());
        children.insert(it, {byte, created});
        nodes_.emplace_back();
        node = created;
      } else {
        node = it->second;
      }
    }
    // A pattern given twice keeps its first token, as the first pattern of a set wins.
    if (nodes_[node].pattern < 0) nodes_[node].pattern = static_cast<int>(i);
  }
}

int AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* length) const {
  int node = 0, found = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, -1));
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (nodes_[node].pattern >= 0) {
      found = nodes_[node].pattern;
      *length = i + 1 - pos;
    }
  }
  return found;
}

void AddedTokenMatcher::split(std::string_view text, bool match_special, std::vector<AddedTokenSplit>& out) const {
  if (text.empty()) return;
  size_t start_offset = 0;  // end of what the splits so far cover
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    const int index = longest_at(text, pos, &length);
    if (index < 0) {
      ++pos;
      continue;
    }
    // Matching resumes after the match itself, whatever happens to it below (aho-corasick's
    // non-overlapping iteration).
    size_t start = pos, stop = pos + length;
    pos = stop;
    const AddedToken& token = *tokens_[static_cast<size_t>(index)];
    if (token.special && !match_special) continue;
    if (token.single_word) {
      size_t n = 0;
      const bool space_before = start == 0 || !utf8::is_word_char(utf8::decode_before(text, start, &n));
      const bool space_after = stop == text.size() || !utf8::is_word_char(utf8::decode(text, stop, &n));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) start = std::max(whitespace_run_before(text, start), start_offset);
    if (token.rstrip) stop = whitespace_run_after(text, stop);
    if (start_offset < start) out.push_back({start_offset, start, nullptr});
    out.push_back({start, stop, &token});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), nullptr});
}

}  // namespace ferry
