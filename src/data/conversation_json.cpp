// Parsing of message lists (and tools) from ColossalChat-style JSON objects.
#include "src/data/conversation_json.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ferry {

Conversation conversation_from_json(const nlohmann::ordered_json& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end()) throw InputError("missing field \"" + key + "\"");
  if (!it->is_array()) throw InputError("field \"" + key + "\" must be a list of messages");
  Conversation conversation;
  for (size_t i = 0; i < it->size(); ++i) {
    const auto& message = (*it)[i];
    const std::string where = "\"" + key + "\"[" + std::to_string(i) + "]";
    if (!message.is_object()) throw InputError(where + " must be an object with role and content");
    auto role = message.find("role");
    if (role == message.end()) role = message.find("from");
    if (role == message.end() || !role->is_string()) {
      throw InputError(where + " needs a string \"role\" (or \"from\"): system, user, assistant or tool");
    }
    const auto parsed = parse_chat_role(role->get<std::string>());
    if (!parsed) {
      throw InputError(where + ": unknown role \"" + role->get<std::string>() +
                       "\" (expected system, user, assistant or tool)");
    }
    ChatMessage out{*parsed, "", nlohmann::ordered_json::object(), true};
    for (const auto& [name, value] : message.items()) {
      if (name != "role" && name != "from" && name != "content") out.fields[name] = nlohmann::ordered_json(value);
    }
    const auto content = message.find("content");
    if (content != message.end() && content->is_string()) {
      out.content = content->get<std::string>();
    } else if ((content == message.end() || content->is_null()) && *parsed == ChatRole::assistant &&
               out.has_tool_calls()) {
      out.content_given = false;
    } else {
      throw InputError(where + " needs a string \"content\"" +
                       (*parsed == ChatRole::assistant ? " (or \"tool_calls\")" : std::string()));
    }
    if (const auto calls = out.fields.find("tool_calls"); calls != out.fields.end() && !calls->is_null()) {
      if (*parsed != ChatRole::assistant || !calls->is_array()) {
        throw InputError(where + ": \"tool_calls\" must be a list, on an assistant message");
      }
    }
    conversation.push_back(std::move(out));
  }
  return conversation;
}

ChatContext chat_context_from_json(const nlohmann::ordered_json& object) {
  ChatContext context;
  for (const char* key : {"tools", "documents"}) {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) continue;
    if (!it->is_array()) throw InputError(std::string("field \"") + key + "\" must be a list of objects");
    for (const auto& item : *it) {
      if (!item.is_object()) throw InputError(std::string("field \"") + key + "\" must be a list of objects");
    }
    (std::string(key) == "tools" ? context.tools : context.documents) = nlohmann::ordered_json(*it);
  }
  return context;
}

}  // namespace ferry
