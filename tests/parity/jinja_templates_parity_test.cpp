// Ferry's Jinja renderer against transformers (tests/parity/jinja_templates_ref.py): every chat
// template in shared/chat-templates (52 public models' templates, llama.cpp's and
// chujiezheng/chat_templates') and a few with {% generation %} blocks, each rendered for 16
// conversations (tools and tool results, reasoning, unicode, empty and whitespace-laden contents,
// generation prompts on and off, enable_thinking, extra variables) with exactly the variables
// transformers' apply_chat_template(tokenize=False) gave the template. Each case must give the
// same bytes, or raise where transformers raises (a template's raise_exception() with its
// message), and {% generation %} spans must equal transformers' AssistantTracker offsets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "src/tokenizer/jinja/template.h"
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

// One case: "" when Ferry agrees with transformers, else what differs.
std::string check_case(const Template& tpl, const nlohmann::ordered_json& c, const RenderOptions& options) {
  RenderResult result;
  try {
    result = tpl.render(c["variables"], options);
  } catch (const TemplateError& e) {
    if (!c.contains("raises")) return std::string("ferry raised: ") + e.what();
    const std::string want = c["raises"].get<std::string>();
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
  const size_t total = f["cases"].size();
  for (const auto& c : f["cases"]) {
    const std::string name = c["template"].get<std::string>();
    const auto tpl = templates.find(name);
    if (tpl == templates.end()) continue;
    const std::string problem = check_case(tpl->second, c, options);
    if (problem.empty()) {
      ++equal;
      raised_both += c.contains("raises");
    } else {
      ADD_FAILURE() << name << " / " << c["conversation"].get<std::string>() << ": " << problem;
    }
  }
  std::cout << "jinja parity: " << equal << " / " << total << " cases equal to transformers " << f["transformers"]
            << " (" << raised_both << " of them raise in both), " << templates.size() << " templates\n";
  EXPECT_EQ(equal, total);
  EXPECT_GE(templates.size(), 52u);
  EXPECT_GE(total, 52u * 12);
}

TEST(JinjaTemplatesParity, GenerationSpansAreChecked) {
  size_t with_spans = 0;
  for (const auto& c : fixture()["cases"]) with_spans += c.contains("generation_spans");
  EXPECT_GT(with_spans, 0u);  // the fixture exercises {% generation %}
}

}  // namespace
}  // namespace ferry::jinja
