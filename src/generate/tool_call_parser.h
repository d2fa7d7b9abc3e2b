// Tool calls in an assistant's text, in the formats model families are trained on:
//
//   hermes   Hermes / Qwen / GLM: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number
//   llama3   Llama 3.x: the whole answer one JSON object {"name": ..., "parameters": {...}}
//            (or "arguments"), optionally after <|python_tag|>; several separated by ";"
//   mistral  Mistral: [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...], or the newer
//            [TOOL_CALLS]name[ARGS]{...} repeated
//   none     no parsing: the text is the content
//
// Each call becomes what transformers' chat templates take: {"id", "type": "function",
// "function": {"name", "arguments": {...}}}, with ids call00001, call00002, ... in order (nine
// characters: Mistral's templates want at least nine). A call that does not parse is never an
// error: it is kept as {"text", "error"} in `invalid_tool_calls`, for the environment to judge.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/config/config_enum.h"

namespace ferry {

struct ParsedAssistantTurn {
  std::string content;  // the text outside the tool-call markup, trimmed
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
  nlohmann::ordered_json invalid_tool_calls = nlohmann::ordered_json::array();
};

// `format` must not be auto (resolve it with tool_call_format_of first).
ParsedAssistantTurn parse_tool_calls(std::string_view text, ToolCallFormat format);

// The format a chat template's source writes tool calls in (hermes for "<tool_call>", mistral for
// "[TOOL_CALLS]", llama3 for "<|python_tag|>" or a {"name": ..., "parameters": ...} call), none
// when it writes none. `configured` other than auto is returned as it is.
ToolCallFormat tool_call_format_of(std::string_view template_source, ToolCallFormat configured);

}  // namespace ferry
