// Parsing of message lists from ColossalChat-style JSON objects.
#include "src/data/conversation_json.h"

#include <nlohmann/json.hpp>

#include "src/core/error.h"

namespace ferry {

Conversation conversation_from_json(const nlohmann::json& object, const std::string& key) {
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
      throw InputError(where + " needs a string \"role\" (or \"from\"): system, user or assistant");
    }
    const auto content = message.find("content");
    if (content == message.end() || !content->is_string()) {
      throw InputError(where + " needs a string \"content\"");
    }
    const auto parsed = parse_chat_role(role->get<std::string>());
    if (!parsed) {
      throw InputError(where + ": unknown role \"" + role->get<std::string>() +
                       "\" (expected system, user or assistant)");
    }
    conversation.push_back({*parsed, content->get<std::string>()});
  }
  return conversation;
}

}  // namespace ferry
