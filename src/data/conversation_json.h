// ColossalChat-style conversations in JSON: `{"messages": [{"role"|"from": ..., "content": ...}]}`
// for SFT and prompts, and `{"context": [...], "chosen": [...], "rejected": [...]}` for preference
// pairs; with tool use as transformers takes it: `"tools": [...]` beside the messages, assistant
// messages with `tool_calls` and `tool` messages. Errors say which field is wrong; the jsonl reader
// adds file:line.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "src/tokenizer/chat_message.h"

namespace ferry {

// The message list under `key` ("messages", "context", "chosen", "rejected"). Each message needs
// a role ("role" or "from": system/user/assistant/tool, or human/gpt) and a string "content"; an
// assistant message with "tool_calls" may leave content out (or null). Every other field is kept
// for the template (ChatMessage::fields).
Conversation conversation_from_json(const nlohmann::ordered_json& object, const std::string& key);

// The line's "tools" and "documents" (lists; absent or null: not given).
ChatContext chat_context_from_json(const nlohmann::ordered_json& object);

}  // namespace ferry
