// Chat roles, messages as chat templates see them, and the order rule for conversations.
#include "src/tokenizer/chat_message.h"

#include "core/error.h"

namespace ferry {

bool ChatMessage::has_tool_calls() const {
  const auto it = fields.find("tool_calls");
  return it != fields.end() && !it->is_null() && !(it->is_array() && it->empty());
}

nlohmann::ordered_json ChatMessage::to_template_json() const {
  nlohmann::ordered_json message = nlohmann::ordered_json::object();
  message["role"] = chat_role_name(role);
  if (content_given) message["content"] = content;
  for (const auto& [key, value] : fields.items()) {
    if (!value.is_null()) message[key] = value;  // transformers drops keys whose value is None
  }
  // transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}, r the
  // first of reasoning_content, thinking, reasoning that is set.
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const auto it = message.find(key);
    if (it == message.end()) continue;
    const nlohmann::ordered_json reasoning = *it;
    nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
    aliased["thinking"] = reasoning;
    for (const auto& [k, v] : message.items()) aliased[k] = v;
    aliased["reasoning_content"] = reasoning;
    return aliased;
  }
  return message;
}

std::optional<ChatRole> parse_chat_role(std::string_view name) {
  if (name == "system") return ChatRole::system;
  if (name == "user" || name == "human") return ChatRole::user;
  if (name == "assistant" || name == "gpt") return ChatRole::assistant;
  if (name == "tool") return ChatRole::tool;
  return std::nullopt;
}

ChatRole chat_role_from_string(std::string_view name) {
  if (auto role = parse_chat_role(name)) return *role;
  throw InputError("unknown chat role '" + std::string(name) +
                   "': expected system, user (or human), assistant (or gpt) or tool");
}

const char* chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
    case ChatRole::tool:
      return "tool";
  }
  return "?";
}

bool has_tool_messages(const Conversation& conversation) {
  for (const ChatMessage& m : conversation) {
    if (m.role == ChatRole::tool || m.has_tool_calls()) return true;
  }
  return false;
}

void check_conversation(const Conversation& conversation, ConversationEnd end) {
  if (conversation.empty()) throw InputError("the conversation has no messages");
  auto where = [](size_t i, ChatRole role) {
    return "message " + std::to_string(i + 1) + " (" + chat_role_name(role) + ")";
  };
  size_t first = 0;
  if (conversation[0].role == ChatRole::system) first = 1;
  if (first == conversation.size()) {
    throw InputError("the conversation has only a system message; it needs a user message after it");
  }
  for (size_t i = first; i < conversation.size(); ++i) {
    const ChatMessage& message = conversation[i];
    if (message.role == ChatRole::system) {
      throw InputError(where(i, message.role) + ": a system message may only come first");
    }
    const ChatMessage* previous = i == first ? nullptr : &conversation[i - 1];
    const std::string position = i == 0       ? std::string("first")
                                 : i == first ? std::string("after the system message")
                                              : "after " + where(i - 1, previous->role);
    if (message.role == ChatRole::tool) {
      const bool after_call = previous && (previous->role == ChatRole::tool ||
                                           (previous->role == ChatRole::assistant && previous->has_tool_calls()));
      if (!after_call) {
        throw InputError(where(i, message.role) + ": a tool message must follow an assistant message with "
                         "tool_calls (or another tool message), not come " + position);
      }
      continue;
    }
    // Plain turns alternate user, assistant; an assistant message also answers tool results.
    const ChatRole expected =
        previous && (previous->role == ChatRole::user || previous->role == ChatRole::tool) ? ChatRole::assistant
                                                                                           : ChatRole::user;
    if (message.role != expected) {
      throw InputError(where(i, message.role) + ": expected " + (expected == ChatRole::user ? "a user" : "an assistant") +
                       " message " + position + "; user and assistant messages must alternate, user first");
    }
  }
  const ChatRole last = conversation.back().role;
  if (end == ConversationEnd::assistant && last != ChatRole::assistant) {
    throw InputError(where(conversation.size() - 1, last) +
                     ": a training conversation must end with the assistant's answer");
  }
  if (end == ConversationEnd::user && last != ChatRole::user && last != ChatRole::tool) {
    throw InputError(where(conversation.size() - 1, last) +
                     ": a prompt must end with a user message (or tool results) for the model to answer");
  }
  if (end == ConversationEnd::continued) {
    const ChatMessage& final = conversation.back();
    if (last != ChatRole::assistant) {
      throw InputError(where(conversation.size() - 1, last) +
                       ": continue_final_message continues the assistant's reply; the last message must be the "
                       "assistant's (the start of its answer), or leave continue_final_message off to answer it");
    }
    if (!final.content_given) {
      throw InputError(where(conversation.size() - 1, last) +
                       ": continue_final_message is set but the final message has no \"content\" to continue");
    }
  }
}

}  // namespace ferry
