// A chat conversation as data: messages with a role (system, user, assistant, tool) and the rule
// for their order, which every chat template and data loader relies on.
//
// A message keeps the fields a data line gave it beyond role and content (an assistant's
// `tool_calls`, a tool result's `tool_call_id` and `name`, `reasoning_content`, ...): a model's own
// (Jinja) chat template sees each message as the JSON object transformers would pass it. The
// shipped YAML templates render role and content only, and refuse tool messages.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ferry {

enum class ChatRole { system, user, assistant, tool };

struct ChatMessage {
  ChatRole role = ChatRole::user;
  std::string content;
  // The message's other fields, in the order the data gave them (never "role" or "content");
  // an empty object for a plain message. `content_given` false: the data had no (or a null)
  // content, as an assistant message with only tool_calls may.
  nlohmann::ordered_json fields = nlohmann::ordered_json::object();
  bool content_given = true;
  bool operator==(const ChatMessage&) const = default;

  bool has_tool_calls() const;
  // The message as a chat template sees it: {"role", "content", ...fields}, as transformers
  // normalises it (keys whose value is null dropped; reasoning_content / thinking / reasoning
  // aliased to one another).
  nlohmann::ordered_json to_template_json() const;
};

using Conversation = std::vector<ChatMessage>;

// What a data line may carry beside its messages for a model's chat template, as transformers'
// apply_chat_template takes it: `tools` (a list of JSON-schema functions) and `documents` (a list
// of {title, text}). Null when not given.
struct ChatContext {
  nlohmann::ordered_json tools;
  nlohmann::ordered_json documents;
  bool empty() const { return tools.is_null() && documents.is_null(); }
};

// "system", "user", "assistant", "tool"; the aliases datasets use ("human", "gpt") are accepted too.
std::optional<ChatRole> parse_chat_role(std::string_view name);
// As parse_chat_role, but throws InputError listing the accepted names.
ChatRole chat_role_from_string(std::string_view name);
const char* chat_role_name(ChatRole role);

// What a conversation must end with to be used.
enum class ConversationEnd {
  assistant,  // training: the last message is the answer the loss is taken on
  user,       // generation: the model answers the last user (or tool) message
  continued,  // generation: the model continues the last (assistant) message, a prefilled answer
};

// Checks the order: at most one system message, first; then rounds that each start with a user
// message, followed by an assistant answer; within a round an assistant message with tool_calls
// may be followed by tool messages (one per call) and another assistant message; ending as `end`
// requires (a prompt may end with tool results: the model answers them). Throws InputError saying
// which message is wrong (by 1-based position); the caller adds the file and line.
void check_conversation(const Conversation& conversation, ConversationEnd end);

// True when any message is a tool message or carries tool_calls.
bool has_tool_messages(const Conversation& conversation);

}  // namespace ferry
