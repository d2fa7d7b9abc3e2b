// Parsing tool calls out of assistant text (see tool_call_parser.h).
#include "src/generate/tool_call_parser.h"

#include <cstdio>

#include "core/text.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

std::string_view trim_view(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::string call_id(size_t number) {
  char id[16];
  std::snprintf(id, sizeof(id), "call%05zu", number);
  return id;
}

// A call object {"name", "arguments" | "parameters"} (arguments may be a JSON string) as a template
// takes it; false with `error` otherwise.
bool to_call(const Json& object, size_t number, Json& call, std::string& error) {
  if (!object.is_object()) {
    error = "a tool call must be a JSON object with \"name\" and \"arguments\"";
    return false;
  }
  const auto name = object.find("name");
  if (name == object.end() || !name->is_string() || name->get<std::string>().empty()) {
    error = "the tool call has no \"name\" string";
    return false;
  }
  Json arguments = Json::object();
  auto args = object.find("arguments");
  if (args == object.end()) args = object.find("parameters");
  if (args != object.end()) {
    arguments = *args;
    if (arguments.is_string()) {
      arguments = Json::parse(arguments.get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (arguments.is_discarded()) {
        error = "the tool call's \"arguments\" string is not JSON";
        return false;
      }
    }
    if (!arguments.is_object()) {
      error = "the tool call's \"arguments\" must be a JSON object";
      return false;
    }
  }
  call = Json{{"id", call_id(number)},
              {"type", "function"},
              {"function", Json{{"name", name->get<std::string>()}, {"arguments", arguments}}}};
  return true;
}

void add_call(ParsedAssistantTurn& out, const Json& object, std::string_view text) {
  Json call;
  std::string error;
  if (to_call(object, out.tool_calls.size() + 1, call, error)) {
    out.tool_calls.push_back(std::move(call));
  } else {
    out.invalid_tool_calls.push_back(Json{{"text", std::string(trim_view(text))}, {"error", error}});
  }
}

void add_invalid(ParsedAssistantTurn& out, std::string_view text, std::string error) {
  out.invalid_tool_calls.push_back(Json{{"text", std::string(trim_view(text))}, {"error", std::move(error)}});
}

void add_json_call(ParsedAssistantTurn& out, std::string_view text) {
  const Json object = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) {
    add_invalid(out, text, "not valid JSON");
    return;
  }
  add_call(out, object, text);
}

ParsedAssistantTurn parse_hermes(std::string_view text) {
  static constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  ParsedAssistantTurn out;
  std::string content;
  size_t at = 0;
  while (true) {
    const size_t open = text.find(kOpen, at);
    if (open == std::string_view::npos) {
      content.append(text.substr(at));
      break;
    }
    content.append(text.substr(at, open - at));
    const size_t body = open + kOpen.size();
    const size_t close = text.find(kClose, body);
    if (close == std::string_view::npos) {
      add_invalid(out, text.substr(open), "<tool_call> is not closed by </tool_call>");
      break;
    }
    add_json_call(out, text.substr(body, close - body));
    at = close + kClose.size();
  }
  out.content = trim(content);
  return out;
}

std::string_view strip_suffix(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix
             ? text.substr(0, text.size() - suffix.size())
             : text;
}

ParsedAssistantTurn parse_llama3(std::string_view text) {
  static constexpr std::string_view kPythonTag = "<|python_tag|>";
  ParsedAssistantTurn out;
  std::string_view body = trim_view(text);
  body = trim_view(strip_suffix(strip_suffix(body, "<|eot_id|>"), "<|eom_id|>"));
  const bool tagged = body.substr(0, kPythonTag.size()) == kPythonTag;
  if (tagged) body = trim_view(body.substr(kPythonTag.size()));
  if (!tagged && (body.empty() || body.front() != '{')) {
    out.content = std::string(trim_view(text));
    return out;
  }
  // One object, or several separated by ";" (Llama 3.1's parallel calls).
  const Json whole = Json::parse(body, nullptr, false);
  if (!whole.is_discarded()) {
    if (!tagged && !(whole.is_object() && whole.contains("name"))) {  // JSON, but an answer, not a call
      out.content = std::string(trim_view(text));
      return out;
    }
    add_call(out, whole, body);
    return out;
  }
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find(';', at);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view part = trim_view(body.substr(at, end - at));
    if (!part.empty()) add_json_call(out, part);
    at = end + 1;
  }
  return out;
}

ParsedAssistantTurn parse_mistral(std::string_view text) {
  static constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]";
  ParsedAssistantTurn out;
  const size_t start = text.find(kCalls);
  if (start == std::string_view::npos) {
    out.content = std::string(trim_view(text));
    return out;
  }
  out.content = std::string(trim_view(text.substr(0, start)));
  std::string_view rest = trim_view(strip_suffix(trim_view(text.substr(start + kCalls.size())), "</s>"));
  if (!rest.empty() && rest.front() == '[') {  // [{"name": ..., "arguments": ...}, ...]
    const Json list = Json::parse(rest, nullptr, false);
    if (list.is_discarded() || !list.is_array()) {
      add_invalid(out, rest, "[TOOL_CALLS] must be followed by a JSON list of calls");
      return out;
    }
    for (const Json& item : list) add_call(out, item, item.dump());
    return out;
  }
  // name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}
  while (!rest.empty()) {
    const size_t args = rest.find(kArgs);
    if (args == std::string_view::npos) {
      add_invalid(out, rest, "a [TOOL_CALLS] call must be name[ARGS]{...} or a JSON list");
      return out;
    }
    const std::string name(trim_view(rest.substr(0, args)));
    size_t next = rest.find(kCalls, args);
    const std::string_view arguments = trim_view(rest.substr(args + kArgs.size(), next == std::string_view::npos ? rest.npos : next - args - kArgs.size()));
    const Json parsed = Json::parse(arguments, nullptr, false);
    if (parsed.is_discarded()) {
      add_invalid(out, rest.substr(0, next), "the arguments after [ARGS] are not valid JSON");
    } else {
      add_call(out, Json{{"name", name}, {"arguments", parsed}}, rest.substr(0, next));
    }
    if (next == std::string_view::npos) break;
    rest = rest.substr(next + kCalls.size());
  }
  return out;
}

}  // namespace

ParsedAssistantTurn parse_tool_calls(std::string_view text, ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::hermes: return parse_hermes(text);
    case ToolCallFormat::llama3: return parse_llama3(text);
    case ToolCallFormat::mistral: return parse_mistral(text);
    case ToolCallFormat::none:
    case ToolCallFormat::auto_: break;
  }
  ParsedAssistantTurn out;
  out.content = std::string(text);
  return out;
}

ToolCallFormat tool_call_format_of(std::string_view source, ToolCallFormat configured) {
  if (configured != ToolCallFormat::auto_) return configured;
  if (source.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::hermes;
  if (source.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::mistral;
  if (source.find("<|python_tag|>") != std::string_view::npos ||
      source.find("\"parameters\": ") != std::string_view::npos) {
    return ToolCallFormat::llama3;
  }
  return ToolCallFormat::none;
}

}  // namespace ferry
