// How the Jinja renderer reports errors: a TemplateError (an InputError: the user's to fix,
// exit code 2) whose message is "<source name>:<line>:<column>: <what>", at the token where the
// problem is; a template's raise_exception() keeps its own text; statements that would read
// other templates or files are refused when parsed. Where jinja2 reports the same problem the
// comment says how (jinja2 gives lines only).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "src/tokenizer/jinja/template.h"

namespace ferry::jinja {
namespace {

const char* kName = "tokenizer_config.json chat_template";

// The error parsing and then rendering `source` gives (fails the test if there is none).
TemplateError error_of(const std::string& source, const nlohmann::ordered_json& variables = nlohmann::ordered_json::object()) {
  try {
    Template::parse(source, kName).render(variables);
  } catch (const TemplateError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << source;
  return TemplateError(ErrorKind::runtime, "", 0, 0, "");
}

TEST(JinjaErrors, UnknownFilterIsASyntaxErrorAtItsToken) {
  // jinja2: TemplateAssertionError "No filter named 'foo'." on line 2.
  const TemplateError e = error_of("{% set x = 1 %}\n{{ x | foo }}");
  EXPECT_EQ(e.kind(), ErrorKind::syntax);
  EXPECT_STREQ(e.what(), "tokenizer_config.json chat_template:2:8: unknown filter 'foo'");
  EXPECT_EQ(e.line(), 2u);
  EXPECT_EQ(e.column(), 8u);
}

TEST(JinjaErrors, UnknownFilterInsideIfFailsOnlyWhenEvaluated) {
  // jinja2 3.x checks filters in if statements and conditional expressions at run time.
  const Template tpl = Template::parse("{% if x %}{{ x | foo }}{% endif %}{{ 'a' | bar if x else 'b' }}", kName);
  EXPECT_EQ(tpl.render({{"x", false}}).text, "b");
  try {
    tpl.render({{"x", true}});
    ADD_FAILURE() << "no error";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::runtime);
    EXPECT_STREQ(e.what(), "tokenizer_config.json chat_template:1:18: unknown filter 'foo'");
  }
}

TEST(JinjaErrors, RaiseExceptionKeepsTheTemplatesTextAndPlace) {
  const TemplateError e = error_of("line1\n  {{ raise_exception('Roles must alternate') }}");
  EXPECT_EQ(e.kind(), ErrorKind::raised);
  EXPECT_EQ(e.detail(), "Roles must alternate");
  EXPECT_STREQ(e.what(), "tokenizer_config.json chat_template:2:6: Roles must alternate");
}

TEST(JinjaErrors, RuntimeErrorsNameTheOperator) {
  const TemplateError e = error_of("{% for m in messages %}\n{{ m.content + 1 }}{% endfor %}",
                                   {{"messages", {{{"content", "hi"}}}}});
  EXPECT_EQ(e.kind(), ErrorKind::type);  // Python's TypeError, as transformers raises
  EXPECT_STREQ(e.what(),
               "tokenizer_config.json chat_template:2:14: TypeError: can only concatenate str (not \"int\") to str");
}

TEST(JinjaErrors, IteratingNoneNamesTheForStatement) {
  // What transformers says for templates that loop over `tools` when no tools are passed.
  const TemplateError e = error_of("x\n{% for tool in tools %}{% endfor %}", {{"tools", nullptr}});
  EXPECT_EQ(e.kind(), ErrorKind::type);
  EXPECT_STREQ(e.what(), "tokenizer_config.json chat_template:2:4: TypeError: 'NoneType' object is not iterable");
}

TEST(JinjaErrors, UndefinedMessagesFollowJinja2) {
  EXPECT_EQ(error_of("{{ nothing.attr }}").kind(), ErrorKind::undefined);  // jinja2's UndefinedError
  EXPECT_NE(std::string(error_of("{{ nothing.attr }}").what()).find("UndefinedError: 'nothing' is undefined"),
            std::string::npos);
  EXPECT_NE(std::string(error_of("{{ m.a.b }}", {{"m", nlohmann::ordered_json::object()}}).what())
                .find("UndefinedError: 'dict object' has no attribute 'a'"),
            std::string::npos);
}

TEST(JinjaErrors, ColumnsCountCharactersNotBytes) {
  const TemplateError e = error_of("héllo wörld {{ x | foo }}");
  EXPECT_EQ(e.line(), 1u);
  EXPECT_EQ(e.column(), 20u);
}

TEST(JinjaErrors, SyntaxErrors) {
  // jinja2: "Unexpected end of template. Jinja was looking for the following tags: 'elif' or
  // 'else' or 'endif'."
  EXPECT_STREQ(error_of("{% if x %}no end").what(),
               "tokenizer_config.json chat_template:1:17: unexpected end of template: looking for 'elif' or 'else' "
               "or 'endif'");
  // jinja2: "Encountered unknown tag 'frobnicate'."
  EXPECT_STREQ(error_of("\n  {% frobnicate %}").what(),
               "tokenizer_config.json chat_template:2:6: Encountered unknown tag 'frobnicate'.");
  // jinja2: "Missing end of comment tag"
  EXPECT_STREQ(error_of("a {# never closed").what(), "tokenizer_config.json chat_template:1:3: Missing end of comment tag");
  // jinja2: "unexpected '}', expected ')'"
  EXPECT_STREQ(error_of("{{ (1 }}").what(), "tokenizer_config.json chat_template:1:7: unexpected '}', expected ')'");
  EXPECT_STREQ(error_of("{{ 'open }}").what(), "tokenizer_config.json chat_template:1:4: unexpected char '''");
  EXPECT_EQ(error_of("{% for x in %}{% endfor %}").kind(), ErrorKind::syntax);
  EXPECT_EQ(error_of("{% break %}").kind(), ErrorKind::syntax);  // outside a loop
  EXPECT_EQ(error_of("{{ x is eq }}{{ 1 +* 2 }}").kind(), ErrorKind::syntax);
}

TEST(JinjaErrors, StatementsThatReadFilesAreRefused) {
  for (const char* tag : {"include 'other.jinja'", "import 'macros.jinja' as m", "from 'x.jinja' import y",
                          "extends 'base.jinja'", "block body %}{% endblock"}) {
    const std::string source = std::string("{% ") + tag + " %}";
    const TemplateError e = error_of(source);
    EXPECT_EQ(e.kind(), ErrorKind::syntax) << source;
    const std::string keyword = std::string(tag).substr(0, std::string(tag).find(' '));
    EXPECT_NE(std::string(e.what()).find("'" + keyword + "' is not supported"), std::string::npos) << e.what();
  }
}

TEST(JinjaErrors, TemplateErrorIsAnInputError) {
  try {
    Template::parse("{{ x | foo }}", kName);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {  // the CLI maps UserError (InputError's base) to exit code 2
    EXPECT_NE(std::string(e.what()).find("unknown filter"), std::string::npos);
  }
}

TEST(JinjaErrors, VariablesMustBeAnObject) {
  const Template tpl = Template::parse("{{ x }}", kName);
  EXPECT_THROW(tpl.render(nlohmann::ordered_json::array()), TemplateError);
  EXPECT_THROW(tpl.render({{"x", 18446744073709551615ull}}), TemplateError);  // beyond 64-bit ints
}

}  // namespace
}  // namespace ferry::jinja
