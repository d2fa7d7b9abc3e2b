// Errors of the Jinja renderer. A template that does not parse, or fails while it renders (an
// undefined name used as a value, a type error, `raise_exception(...)`, a sandbox limit), ends in
// one TemplateError whose message names the template, line and column:
//   tokenizer_config.json chat_template:12:5: unknown filter 'foo'
// Code deep inside the renderer (filters, methods, operators) does not know where it is in the
// template: it throws Failure, and the expression or statement being evaluated adds the place.
// A Failure's message starts with the Python exception jinja2 would raise ("TypeError: ...",
// "UndefinedError: ..."); its ErrorKind is read from that name unless given.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ferry::jinja {

// What went wrong, for callers that react differently (a template's own raise_exception is a
// message for the user of the model; a limit says the template is hostile or the input huge).
// The kinds follow the exceptions transformers' apply_chat_template raises for the same template
// (tests/parity/jinja_templates_parity_test.cpp holds the two to the same kind).
enum class ErrorKind : uint8_t {
  syntax,     // the template does not parse (also a statement the sandbox has not: include, import)
  undefined,  // jinja2's UndefinedError: an undefined name or attribute used as a value
  type,       // Python's TypeError: an operation on a value of the wrong type (iterating None, str + int)
  runtime,    // any other Python error while rendering: ValueError, SecurityError, TemplateRuntimeError, ...
  raised,     // the template called raise_exception(message)
  limit,      // a RenderLimits bound: output size, steps, recursion depth
};

// The kind a Failure message names with its leading Python exception: "TypeError: ..." is type,
// "UndefinedError: ..." undefined, anything else runtime.
ErrorKind kind_named_in(std::string_view message);

class TemplateError : public InputError {
 public:
  TemplateError(ErrorKind kind, const std::string& source_name, uint32_t line, uint32_t column, std::string detail);

  ErrorKind kind() const { return kind_; }
  uint32_t line() const { return line_; }
  uint32_t column() const { return column_; }
  // The message without the place: raise_exception's own text for ErrorKind::raised.
  const std::string& detail() const { return detail_; }

 private:
  ErrorKind kind_;
  uint32_t line_, column_;
  std::string detail_;
};

// A failure raised where the place in the template is not known; see the file comment.
class Failure : public std::exception {
 public:
  explicit Failure(std::string message) : message_(std::move(message)), kind_(kind_named_in(message_)) {}
  Failure(std::string message, ErrorKind kind) : message_(std::move(message)), kind_(kind) {}
  const char* what() const noexcept override { return message_.c_str(); }
  ErrorKind kind() const { return kind_; }

 private:
  std::string message_;
  ErrorKind kind_;
};

// A template that does not parse: the message and the byte offset it is about.
class SyntaxFailure : public std::exception {
 public:
  SyntaxFailure(size_t offset, std::string message) : offset_(offset), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
  std::string message_;
};

// Line and column (1-based; columns count characters) of byte `offset` in `source`.
struct SourcePosition {
  uint32_t line, column;
};
SourcePosition position_of(std::string_view source, size_t offset);

}  // namespace ferry::jinja
