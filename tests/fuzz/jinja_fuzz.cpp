// Fuzz target: the Jinja chat-template renderer (src/tokenizer/jinja) on hostile template text.
// The input is a template's source; it is parsed and, when it parses, rendered against a fixed
// conversation (system, user, an assistant tool call, its result, reasoning, unicode) with tools,
// under tight RenderLimits so each input runs quickly. A TemplateError is the right answer to a
// bad or runaway template; any other exception, a crash, a hang or a sanitizer report is a finding.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "src/tokenizer/jinja/template.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/support/jinja_clock.h"

namespace {

const nlohmann::ordered_json& variables() {
  static const nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are brief. \u00e9\u00e8 \ud83d\ude42"},
      {"role": "user", "content": "  What's the weather in Paris?\n"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call0wx42", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2], "metric": true}}}]},
      {"role": "tool", "tool_call_id": "call0wx42", "content": "{\"temperature\": 21.5}"},
      {"role": "assistant", "content": "It is 21.5 \u00b0C.", "reasoning_content": "Read the tool result."},
      {"role": "user", "content": ""}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather by city.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "array",
      "items": {"type": "integer"}}}, "required": ["city"]}}}],
    "documents": null,
    "add_generation_prompt": true,
    "enable_thinking": false,
    "bos_token": "<s>",
    "eos_token": "</s>"
  })");
  return vars;
}

ferry::jinja::RenderOptions options() {
  ferry::jinja::RenderOptions o = ferry::test_support::pinned_clock();
  o.limits.max_output_bytes = 1 << 20;
  o.limits.max_steps = 100'000;
  o.limits.max_depth = 64;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const ferry::jinja::RenderOptions render_options = options();
  ferry_fuzz::expect_clean([&] {
    const auto tpl = ferry::jinja::Template::parse(ferry_fuzz::as_text(data, size), "fuzz");
    const auto out = tpl.render(variables(), render_options);
    for (const auto& [begin, end] : out.generation_spans) {
      if (begin > end || end > out.text.size()) std::abort();  // spans must lie inside the text
    }
  });
  return 0;
}
