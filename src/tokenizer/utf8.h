// UTF-8 helpers for the tokenizer.json tokenizer: decoding and encoding characters, validation,
// Rust's String::from_utf8_lossy (how `tokenizers` repairs decoded bytes), and the two Unicode
// character classes its added-token matcher uses (White_Space for lstrip/rstrip, `\w` for
// single_word).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry::utf8 {

// Length of the character whose first byte is `lead` (1 for a stray continuation byte).
inline size_t char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? (lead < 0xC0 ? 1 : 2) : lead < 0xF0 ? 3 : 4;
}

inline bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// The character at text[pos] of valid UTF-8; sets *length to its byte count.
char32_t decode(std::string_view text, size_t pos, size_t* length);

// The character that ends just before text[end] (valid UTF-8, end > 0); sets *length.
char32_t decode_before(std::string_view text, size_t end, size_t* length);

void append(std::string& out, char32_t c);

// Offset of the first byte that does not belong to well-formed UTF-8, or npos.
size_t find_invalid(std::string_view bytes);

// `bytes` with each maximal ill-formed subsequence replaced by U+FFFD, as Rust's
// String::from_utf8_lossy and Python's errors="replace" do.
std::string lossy(std::string_view bytes);

// Unicode White_Space: Rust's char::is_whitespace and its regex `\s`.
bool is_white_space(char32_t c);

// Rust regex `\w` (Unicode): letters, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(char32_t c);

}  // namespace ferry::utf8
