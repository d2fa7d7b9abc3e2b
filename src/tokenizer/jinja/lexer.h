// Splitting template source into tokens exactly as jinja2's lexer does with transformers'
// settings (trim_blocks and lstrip_blocks on): text between tags, `{{ }}` / `{% %}` with the
// tokens inside, comments and {% raw %} blocks dropped or kept as text, and the whitespace
// control that `-`, `+`, trim_blocks (the newline after a block tag goes) and lstrip_blocks
// (spaces before a block tag on its line go) apply to the text around tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::jinja {

enum class TokenType : uint8_t {
  data, variable_begin, variable_end, block_begin, block_end, name, string, integer, floating, op, eof
};

struct Token {
  TokenType type;
  uint32_t offset;    // of the token's first byte in the normalised source
  std::string text;   // data, a name, an operator, or a string literal's decoded value
  int64_t int_value = 0;
  double float_value = 0;
};

// What jinja2 does to source before lexing: \r\n and \r become \n, and one final newline goes
// (keep_trailing_newline is off).
std::string normalize_source(std::string_view raw);

// Tokens of normalised source, ending with an eof token. Throws SyntaxFailure.
std::vector<Token> tokenize(std::string_view source);

}  // namespace ferry::jinja
