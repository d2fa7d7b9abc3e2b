// The ids after an assistant turn (see turn_continuation.h).
#include "src/tokenizer/turn_continuation.h"

#include <algorithm>

#include "core/error.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {

std::vector<int64_t> turn_continuation_ids(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                           const Conversation& reply, const ChatContext& context,
                                           const std::vector<int64_t>& end_of_turn_ids) {
  FERRY_CHECK(!reply.empty(), "turn_continuation_ids: an empty reply");
  ChatMessage user;
  user.role = ChatRole::user;
  user.content = "dummy";
  ChatMessage assistant;
  assistant.role = ChatRole::assistant;
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const ChatMessage& m : reply) {
    if (m.role != ChatRole::tool) continue;
    const auto name = m.fields.find("name");
    const auto id = m.fields.find("tool_call_id");
    nlohmann::ordered_json call{{"type", "function"},
                                {"function", {{"name", name != m.fields.end() ? *name : nlohmann::ordered_json("tool")},
                                              {"arguments", nlohmann::ordered_json::object()}}}};
    if (id != m.fields.end()) call["id"] = *id;
    calls.push_back(std::move(call));
  }
  if (calls.empty()) {
    assistant.content = "dummy";
  } else {
    assistant.content = "";
    assistant.fields["tool_calls"] = calls;
  }
  Conversation closed{user, assistant};
  std::vector<int64_t> prefix = chat_template.apply(closed, tokenizer, context).ids;
  const auto last_end = std::find_first_of(prefix.rbegin(), prefix.rend(), end_of_turn_ids.begin(), end_of_turn_ids.end());
  if (last_end != prefix.rend()) prefix.resize(static_cast<size_t>(prefix.rend() - last_end));
  Conversation continued = closed;
  continued.insert(continued.end(), reply.begin(), reply.end());
  const std::vector<int64_t> full = chat_template.render_prompt(continued, tokenizer, context);
  if (full.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), full.begin())) {
    throw InputError("chat template " + chat_template.name +
                     " renders an assistant turn differently once the conversation goes on, so an episode's ids "
                     "cannot be extended turn by turn; use a template that leaves earlier turns as they were");
  }
  return std::vector<int64_t>(full.begin() + static_cast<std::ptrdiff_t>(prefix.size()), full.end());
}

}  // namespace ferry
