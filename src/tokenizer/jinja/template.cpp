// The renderer's public entry points (see template.h): parse once, render many times.
#include "src/tokenizer/jinja/template.h"

#include "src/tokenizer/jinja/evaluator.h"
#include "src/tokenizer/jinja/lexer.h"
#include "src/tokenizer/jinja/optimizer.h"
#include "src/tokenizer/jinja/parser.h"

namespace ferry::jinja {

Template Template::parse(std::string_view source, std::string source_name) {
  auto program = std::make_shared<Program>();
  program->name = std::move(source_name);
  if (source.size() > (size_t{1} << 30)) {
    throw TemplateError(ErrorKind::syntax, program->name, 1, 1, "template source larger than 1 GiB");
  }
  program->source = normalize_source(source);
  try {
    program->body = jinja::parse(tokenize(program->source));
    fold_constant_slices(program->body);
  } catch (const SyntaxFailure& failure) {
    const SourcePosition pos = position_of(program->source, failure.offset());
    throw TemplateError(ErrorKind::syntax, program->name, pos.line, pos.column, failure.what());
  }
  return Template(std::move(program));
}

RenderResult Template::render(const nlohmann::ordered_json& variables, const RenderOptions& options) const {
  Evaluator evaluator(*program_, options);
  return evaluator.render(variables);
}

const std::string& Template::source_name() const { return program_->name; }

}  // namespace ferry::jinja
