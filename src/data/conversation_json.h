// ColossalChat-style conversations in JSON: `{"messages": [{"role"|"from": ..., "content": ...}]}`
// for SFT and prompts, and `{"context": [...], "chosen": [...], "rejected": [...]}` for preference
// pairs. Errors say which field is wrong; the jsonl reader adds file:line.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "src/tokenizer/chat_message.h"

namespace ferry {

// The message list under `key` ("messages", "context", "chosen", "rejected"). Each message needs
// a role ("role" or "from": system/user/assistant, or human/gpt) and a string "content".
Conversation conversation_from_json(const nlohmann::json& object, const std::string& key);

}  // namespace ferry
