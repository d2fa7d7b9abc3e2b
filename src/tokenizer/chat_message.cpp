// Chat roles and the order rule for conversations.
#include "src/tokenizer/chat_message.h"

#include "src/core/error.h"

namespace ferry {

std::optional<ChatRole> parse_chat_role(std::string_view name) {
  if (name == "system") return ChatRole::system;
  if (name == "user" || name == "human") return ChatRole::user;
  if (name == "assistant" || name == "gpt") return ChatRole::assistant;
  return std::nullopt;
}

ChatRole chat_role_from_string(std::string_view name) {
  if (auto role = parse_chat_role(name)) return *role;
  throw InputError("unknown chat role '" + std::string(name) +
                   "': expected system, user (or human) or assistant (or gpt)");
}

const char* chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system:
      return "system";
    case ChatRole::user:
      return "user";
    case ChatRole::assistant:
      return "assistant";
  }
  return "?";
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
    const ChatRole role = conversation[i].role;
    const ChatRole expected = (i - first) % 2 == 0 ? ChatRole::user : ChatRole::assistant;
    if (role == ChatRole::system) {
      throw InputError(where(i, role) + ": a system message may only come first");
    }
    if (role != expected) {
      const std::string position = i == 0       ? std::string("first")
                                   : i == first ? std::string("after the system message")
                                                : "after " + where(i - 1, conversation[i - 1].role);
      throw InputError(where(i, role) + ": expected " + (expected == ChatRole::user ? "a user" : "an assistant") +
                       " message " + position + "; user and assistant messages must alternate, user first");
    }
  }
  const ChatRole last = conversation.back().role;
  if (end == ConversationEnd::assistant && last != ChatRole::assistant) {
    throw InputError(where(conversation.size() - 1, last) +
                     ": a training conversation must end with the assistant's answer");
  }
  if (end == ConversationEnd::user && last != ChatRole::user) {
    throw InputError(where(conversation.size() - 1, last) +
                     ": a prompt must end with a user message for the model to answer");
  }
}

}  // namespace ferry
