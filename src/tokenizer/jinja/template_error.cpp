// Errors of the Jinja renderer: the message format, and byte offsets turned into line:column.
#include "src/tokenizer/jinja/template_error.h"

namespace ferry::jinja {
namespace {

std::string format_message(const std::string& source_name, uint32_t line, uint32_t column,
                           const std::string& detail) {
  return source_name + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + detail;
}

}  // namespace

TemplateError::TemplateError(ErrorKind kind, const std::string& source_name, uint32_t line, uint32_t column,
                             std::string detail)
    : InputError(format_message(source_name, line, column, detail)),
      kind_(kind),
      line_(line),
      column_(column),
      detail_(std::move(detail)) {}

ErrorKind kind_named_in(std::string_view message) {
  if (message.starts_with("TypeError: ")) return ErrorKind::type;
  if (message.starts_with("UndefinedError: ")) return ErrorKind::undefined;
  return ErrorKind::runtime;
}

SourcePosition position_of(std::string_view source, size_t offset) {
  SourcePosition pos{1, 1};
  const size_t end = std::min(offset, source.size());
  for (size_t i = 0; i < end; ++i) {
    const auto byte = static_cast<unsigned char>(source[i]);
    if (byte == '\n') {
      ++pos.line;
      pos.column = 1;
    } else if ((byte & 0xC0) != 0x80) {  // count characters, not UTF-8 continuation bytes
      ++pos.column;
    }
  }
  return pos;
}

}  // namespace ferry::jinja
