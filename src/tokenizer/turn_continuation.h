// What a chat template writes after an assistant turn when the conversation goes on: the ids of an
// environment's reply (tool results, a new user message) and of the header of the next assistant
// turn, for multi-turn rollouts that extend a conversation by concatenating ids rather than
// re-tokenising it (the policy's own tokens stay exactly what it sampled).
//
// As TRL's GRPOTrainer._get_tool_suffix_ids, for any kind of reply: a dummy conversation ending
// with an assistant turn (with tool calls named as the reply's tool messages are, when it has any)
// is rendered closed and cut after its last end-of-turn id; then rendered again followed by the
// reply and a generation prompt. The continuation is what the second adds to the first.
#pragma once

#include <cstdint>
#include <vector>

#include "src/tokenizer/chat_message.h"

namespace ferry {

struct ChatTemplate;
class Tokenizer;

// `reply`: the messages after the assistant turn (tool and/or user messages, at least one);
// `end_of_turn_ids`: the ids that end an assistant turn (EOS and the template's stop ids).
// Throws InputError when the template cannot render the reply (a shipped template and a tool
// message) or when the first rendering is not a prefix of the second (the template rewrites
// earlier turns, so ids cannot be concatenated).
std::vector<int64_t> turn_continuation_ids(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                           const Conversation& reply, const ChatContext& context,
                                           const std::vector<int64_t>& end_of_turn_ids);

}  // namespace ferry
