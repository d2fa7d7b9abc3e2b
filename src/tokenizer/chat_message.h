// A chat conversation as data: messages with a role (system, user, assistant) and the rule for
// their order, which every chat template and data loader relies on.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

enum class ChatRole { system, user, assistant };

struct ChatMessage {
  ChatRole role = ChatRole::user;
  std::string content;
  bool operator==(const ChatMessage&) const = default;
};

using Conversation = std::vector<ChatMessage>;

// "system", "user", "assistant"; the aliases datasets use ("human", "gpt") are accepted too.
std::optional<ChatRole> parse_chat_role(std::string_view name);
// As parse_chat_role, but throws InputError listing the accepted names.
ChatRole chat_role_from_string(std::string_view name);
const char* chat_role_name(ChatRole role);

// What a conversation must end with to be used.
enum class ConversationEnd {
  assistant,  // training: the last message is the answer the loss is taken on
  user,       // generation: the model answers the last user message
};

// Checks the order: at most one system message, first; then user and assistant alternating,
// starting with user; ending as `end` requires. Throws InputError saying which message is wrong
// (by 1-based position); the caller adds the file and line.
void check_conversation(const Conversation& conversation, ConversationEnd end);

}  // namespace ferry
