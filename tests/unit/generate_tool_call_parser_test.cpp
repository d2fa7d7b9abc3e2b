// Tool calls parsed from assistant text (src/generate/tool_call_parser.h): each family's format,
// calls that do not parse kept for the environment rather than thrown, and the format a chat
// template writes recognised from its source (the shipped Qwen2.5 template; Llama 3.x and Mistral
// snippets as their templates spell them).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "src/generate/tool_call_parser.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

Json call(const std::string& id, const std::string& name, Json arguments) {
  return Json{{"id", id}, {"type", "function"}, {"function", Json{{"name", name}, {"arguments", std::move(arguments)}}}};
}

TEST(ToolCallParser, HermesCallsAnyNumberAndTheTextAround) {
  const ParsedAssistantTurn p = parse_tool_calls(
      "Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 5, \"b\": 6}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}</tool_call>",
      ToolCallFormat::hermes);
  EXPECT_EQ(p.content, "Let me add.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0], call("call00001", "add", Json{{"a", 5}, {"b", 6}}));
  EXPECT_EQ(p.tool_calls[1], call("call00002", "get_weather", Json{{"city", "Paris"}}));  // a JSON string, decoded
  EXPECT_TRUE(p.invalid_tool_calls.empty());
}

TEST(ToolCallParser, MalformedCallsAreKeptWithTheirErrorNeverThrown) {
  const ParsedAssistantTurn p = parse_tool_calls(
      "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 5</tool_call><tool_call>{\"arguments\": {}}</tool_call>"
      "<tool_call>[1, 2]</tool_call>ok<tool_call>{\"name\": \"x\"",
      ToolCallFormat::hermes);
  EXPECT_TRUE(p.tool_calls.empty());
  ASSERT_EQ(p.invalid_tool_calls.size(), 4u);
  EXPECT_EQ(p.invalid_tool_calls[0]["error"], "not valid JSON");
  EXPECT_EQ(p.invalid_tool_calls[0]["text"], "{\"name\": \"add\", \"arguments\": {\"a\": 5");
  EXPECT_EQ(p.invalid_tool_calls[1]["error"], "the tool call has no \"name\" string");
  EXPECT_EQ(p.invalid_tool_calls[2]["error"], "a tool call must be a JSON object with \"name\" and \"arguments\"");
  EXPECT_EQ(p.invalid_tool_calls[3]["error"], "<tool_call> is not closed by </tool_call>");
  EXPECT_EQ(p.content, "ok");
}

TEST(ToolCallParser, Llama3JsonPythonTagAndPlainAnswers) {
  const ParsedAssistantTurn json = parse_tool_calls("{\"name\": \"add\", \"parameters\": {\"a\": 1}}<|eot_id|>",
                                                    ToolCallFormat::llama3);
  ASSERT_EQ(json.tool_calls.size(), 1u);
  EXPECT_EQ(json.tool_calls[0], call("call00001", "add", Json{{"a", 1}}));
  const ParsedAssistantTurn tagged = parse_tool_calls(
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"x\": 2}}<|eom_id|>",
      ToolCallFormat::llama3);
  ASSERT_EQ(tagged.tool_calls.size(), 2u);
  EXPECT_EQ(tagged.tool_calls[1], call("call00002", "b", Json{{"x", 2}}));
  EXPECT_EQ(parse_tool_calls("The answer is 42.", ToolCallFormat::llama3).content, "The answer is 42.");
  EXPECT_TRUE(parse_tool_calls("{\"answer\": 42}", ToolCallFormat::llama3).tool_calls.empty());  // JSON, no call
  const ParsedAssistantTurn broken = parse_tool_calls("<|python_tag|>{\"name\": ", ToolCallFormat::llama3);
  ASSERT_EQ(broken.invalid_tool_calls.size(), 1u);
}

TEST(ToolCallParser, MistralListAndArgsForms) {
  const ParsedAssistantTurn list = parse_tool_calls(
      "Sure. [TOOL_CALLS] [{\"name\": \"add\", \"arguments\": {\"a\": 1}}, {\"name\": \"neg\", \"arguments\": {}}]</s>",
      ToolCallFormat::mistral);
  EXPECT_EQ(list.content, "Sure.");
  ASSERT_EQ(list.tool_calls.size(), 2u);
  EXPECT_EQ(list.tool_calls[1], call("call00002", "neg", Json::object()));
  const ParsedAssistantTurn args =
      parse_tool_calls("[TOOL_CALLS]add[ARGS]{\"a\": 1}[TOOL_CALLS]neg[ARGS]{\"x\": ", ToolCallFormat::mistral);
  ASSERT_EQ(args.tool_calls.size(), 1u);
  EXPECT_EQ(args.tool_calls[0], call("call00001", "add", Json{{"a", 1}}));
  ASSERT_EQ(args.invalid_tool_calls.size(), 1u);
  EXPECT_EQ(args.invalid_tool_calls[0]["error"], "the arguments after [ARGS] are not valid JSON");
}

TEST(ToolCallParser, NoneKeepsTheRawText) {
  const ParsedAssistantTurn p = parse_tool_calls(" <tool_call>{\"name\": \"a\"}</tool_call> ", ToolCallFormat::none);
  EXPECT_EQ(p.content, " <tool_call>{\"name\": \"a\"}</tool_call> ");
  EXPECT_TRUE(p.tool_calls.empty());
}

TEST(ToolCallParser, TheFormatIsTheOneTheTemplateWrites) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/configs/templates/jinja/qwen2.5/Qwen2.5-7B-Instruct.jinja");
  std::stringstream qwen;
  qwen << in.rdbuf();
  ASSERT_FALSE(qwen.str().empty());
  EXPECT_EQ(tool_call_format_of(qwen.str(), ToolCallFormat::auto_), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format_of("{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}",
                                ToolCallFormat::auto_),
            ToolCallFormat::llama3);
  EXPECT_EQ(tool_call_format_of("{{- \"[TOOL_CALLS] [\" }}", ToolCallFormat::auto_), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format_of("{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}", ToolCallFormat::auto_),
            ToolCallFormat::none);
  EXPECT_EQ(tool_call_format_of(qwen.str(), ToolCallFormat::mistral), ToolCallFormat::mistral);  // configured wins
}

}  // namespace
}  // namespace ferry
