// Parsing tokens into statements and expressions with jinja2's grammar (jinja2/parser.py): the
// same precedence (`-x|f` filters -x; `a|length - 1` subtracts after filtering; `**` is
// left-associative), the same statements (if, for, set, macro, call, filter, with, break,
// continue, raw, and transformers' generation block) and the same rule for unknown filters and
// tests: an error when parsed, except inside an `if` or a conditional expression, where only
// evaluating them fails. Statements that read other templates (extends, include, import, from,
// block) are errors: the renderer reads no files. Nesting is bounded (kMaxNesting) so that
// hostile source cannot exhaust the stack while parsing or rendering.
#pragma once

#include <vector>

#include "src/tokenizer/jinja/ast.h"
#include "src/tokenizer/jinja/lexer.h"

namespace ferry::jinja {

constexpr uint32_t kMaxNesting = 128;

// Throws SyntaxFailure.
Body parse(const std::vector<Token>& tokens);

}  // namespace ferry::jinja
