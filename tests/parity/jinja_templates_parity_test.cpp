// Ferry's Jinja renderer against transformers (tests/parity/jinja_templates_ref.py): every chat
// template in tests/data/chat-templates (52 public models' templates, llama.cpp's and
// chujiezheng/chat_templates') and 3 synthetic ones with {% generation %} blocks, each rendered for
// 16 conversations (tools and tool results, reasoning, unicode, empty and whitespace-laden contents,
// generation prompts on and off, enable_thinking, extra variables) with exactly the variables
// transformers' apply_chat_template(tokenize=False) gave the template. Each case must give the
// same bytes, or raise where transformers raises with the same kind of error (see kErrorKinds; a
// template's raise_exception() with its message), and {% generation %} spans must equal
// transformers' AssistantTracker offsets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "src/tokenizer/jinja/template.h"
#include "tests/support/chat_template_corpus.h"
#include "tests/support/jinja_clock.h"

namespace ferry::jinja {
namespace {

const nlohmann::ordered_json& fixture() {
  static const nlohmann::ordered_json json = [] {
    std::ifstream in(std::string(FERRY_FIXTURES_DIR) + "/jinja_templates/cases.json", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return nlohmann::ordered_json::parse(text.str());
  }();
  return json;
}

// The first byte where two texts differ, with some context, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + ":\n  transformers: " + nlohmann::json(want.substr(from, 120)).dump() +
         "\n  ferry:        " + nlohmann::json(got.substr(from, 120)).dump();
}

// Which error transformers raised (the fixture's raises_kind, from jinja_templates_ref.py's
// error_kind) and the ErrorKind Ferry must raise for it:
//
//   transformers / jinja2 raised                                raises_kind  Ferry's ErrorKind
//   TemplateError from the template's own raise_exception(msg)  raised       raised (same message)
//   jinja2.exceptions.UndefinedError                            undefined    undefined
//   TypeError                                                   type         type
//   TemplateSyntaxError (the template does not compile)         syntax       syntax
//   anything else: TemplateRuntimeError, SecurityError,         other        runtime
//     ValueError, ...
//
// ErrorKind::limit (a RenderLimits bound) has no counterpart: transformers has no such bounds, so
// a limit where transformers raised is a disagreement too.
const std::map<std::string, ErrorKind> kErrorKinds = {
    {"raised", ErrorKind::raised}, {"undefined", ErrorKind::undefined}, {"type", ErrorKind::type},
    {"syntax", ErrorKind::syntax}, {"other", ErrorKind::runtime},
};

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::syntax: return "syntax";
    case ErrorKind::undefined: return "undefined";
    case ErrorKind::type: return "type";
    case ErrorKind::runtime: return "runtime";
    case ErrorKind::raised: return "raised";
    case ErrorKind::limit: return "limit";
  }
  return "?";
}

// One case: "" when Ferry agrees with transformers, else what differs.
std::string check_case(const Template& tpl, const nlohmann::ordered_json& c, const RenderOptions& options) {
  RenderResult result;
  try {
    result = tpl.render(c["variables"], options);
  } catch (const TemplateError& e) {
    if (!c.contains("raises")) return std::string("ferry raised: ") + e.what();
    const std::string want = c["raises"].get<std::string>();
    const auto kind = kErrorKinds.find(c.value("raises_kind", ""));
    if (kind == kErrorKinds.end()) return "the fixture has no known raises_kind for: " + want;
    if (e.kind() != kind->second) {
      return "transformers raised " + c["raises_kind"].get<std::string>() + " (" + want + "), ferry " +
             kind_name(e.kind()) + " (" + e.what() + "); want ErrorKind::" + kind_name(kind->second);
    }
    // raise_exception(message): transformers' TemplateError carries the template's own text.
    if (e.kind() == ErrorKind::raised && want != "TemplateError: " + e.detail()) {
      return "raise_exception message differs: transformers '" + want + "', ferry '" + e.detail() + "'";
    }
    return "";
  }
  if (c.contains("raises")) return "transformers raised " + c["raises"].get<std::string>() + ", ferry rendered";
  const std::string want = c["expected"].get<std::string>();
  if (result.text != want) return "text differs " + first_difference(want, result.text);
  if (c.contains("generation_spans")) {
    const auto spans = c["generation_spans"].get<std::vector<std::pair<size_t, size_t>>>();
    if (result.generation_spans != spans) {
      return "generation spans differ: transformers " + nlohmann::json(spans).dump() + ", ferry " +
             nlohmann::json(result.generation_spans).dump();
    }
  }
  return "";
}

TEST(JinjaTemplatesParity, EveryCaseRendersAsTransformers) {
  const auto& f = fixture();
  const RenderOptions options = test_support::pinned_clock();
  std::map<std::string, Template> templates;
  for (const auto& [name, source] : f["templates"].items()) {
    try {
      templates.emplace(name, Template::parse(source.get<std::string>(), name));
    } catch (const TemplateError& e) {
      ADD_FAILURE() << "template does not parse: " << e.what();
    }
  }
  size_t equal = 0, raised_both = 0;
  std::map<std::string, size_t> raised_by_kind;
  const size_t total = f["cases"].size();
  for (const auto& c : f["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const auto tpl = templates.find(name);
    if (tpl == templates.end()) continue;
    const std::string problem = check_case(tpl->second, c, options);
    if (problem.empty()) {
      ++equal;
      if (c.contains("raises")) {
        ++raised_both;
        ++raised_by_kind[c["raises_kind"].get<std::string>()];
      }
    } else {
      ADD_FAILURE() << name << " / " << c["conversation"].get<std::string>() << ": " << problem;
    }
  }
  // Every template of the corpus folder, and only those, came from it; the synthetic ones apart.
  const auto corpus = f["corpus"].get<std::vector<std::string>>();
  const auto synthetic = f["synthetic"].get<std::vector<std::string>>();
  std::cout << "jinja parity: " << equal << " / " << total << " cases equal to transformers " << f["transformers"]
            << " (" << raised_both << " of them raise in both with the same kind: " << nlohmann::json(raised_by_kind)
            << "), " << templates.size() << " templates: " << corpus.size() << " real (tests/data/chat-templates), "
            << synthetic.size() << " synthetic\n";
  EXPECT_EQ(equal, total);
  EXPECT_EQ(corpus, test_support::chat_template_corpus_files());
  EXPECT_EQ(corpus.size(), test_support::kCorpusTemplates);
  EXPECT_EQ(synthetic.size(), 3u);  // jinja_templates_ref.py's GENERATION_TEMPLATES
  EXPECT_EQ(templates.size(), corpus.size() + synthetic.size());
  EXPECT_EQ(total, templates.size() * 16);  // 16 conversations each
  for (const char* kind : {"raised", "undefined", "type", "other"}) {
    EXPECT_GT(raised_by_kind[kind], 0u) << "no case raises " << kind << ": that kind is not compared";
  }
}

TEST(JinjaTemplatesParity, GenerationSpansAreChecked) {
  size_t with_spans = 0;
  for (const auto& c : fixture()["cases"]) with_spans += c.contains("generation_spans");
  EXPECT_GT(with_spans, 0u);  // the fixture exercises {% generation %}
}

}  // namespace
}  // namespace ferry::jinja
