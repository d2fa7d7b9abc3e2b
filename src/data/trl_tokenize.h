// TRL's dataset rows tokenised as TRL 1.16 tokenises them (trl/data_utils.py, the SFT, DPO, reward
// and KTO trainers' _prepare_dataset), so a data set moved from TRL trains on the same ids:
//   - a field is standard (a string) or conversational (a message list); a row is conversational
//     when its first such field holds messages (is_conversational);
//   - standard text is tokenised as tokenizer(text) is: with the BOS the tokenizer adds
//     (Tokenizer::encode_as_sequence); EOS text is appended to a completion, chosen, rejected or text
//     that does not end with it;
//   - conversational: the prompt through the chat template with the generation prompt, and the
//     prompt + completion as a closed conversation;
//   - the completion starts where the prompt's ids and the prompt + completion's ids diverge
//     (common_prefix_length); the loss is taken on every token after that;
//   - a preference row without "prompt" has its prompt extracted (extract_prompt): the longest
//     common prefix of chosen and rejected, in messages or in characters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "src/data/sft_dataset.h"  // TokenizedSample
#include "src/tokenizer/chat_message.h"

namespace ferry {

class Tokenizer;
struct ChatTemplate;

// A TRL field: text (standard) or messages (conversational).
struct TrlField {
  bool conversational = false;
  std::string text;
  Conversation messages;
};

// TRL's is_conversational: the row's first field among prompt, chosen, rejected, completion and
// messages is a list whose first item is an object with a "role" (or ShareGPT's "from").
bool is_conversational_row(const nlohmann::ordered_json& row);

// The field `key`: a string, or a message list (conversation_from_json). InputError naming the
// field when missing or of another type, or when its kind (text or messages) differs from
// `conversational`.
TrlField trl_field(const nlohmann::ordered_json& row, const std::string& key, bool conversational);

// TRL's extract_prompt: the prompt shared by chosen and rejected (messages, or characters for
// text, giving a separating space back to the responses), which are left with the rest.
TrlField extract_prompt(TrlField& chosen, TrlField& rejected);

// `text` + the tokenizer's EOS text unless it already ends with it (TRL's add_eos).
std::string with_eos_text(const std::string& text, const Tokenizer& tokenizer);

// Ids of the prompt alone: the chat template with its generation prompt, or tokenizer(text).
std::vector<int64_t> trl_prompt_ids(const TrlField& prompt, const ChatContext& context, const Tokenizer& tokenizer,
                                    const ChatTemplate& chat_template);

// Ids of prompt + completion: the closed conversation through the chat template, or
// tokenizer(prompt text + completion text). A standard completion gets no EOS here (with_eos_text).
std::vector<int64_t> trl_sequence_ids(const TrlField& prompt, const TrlField& completion, const ChatContext& context,
                                      const Tokenizer& tokenizer, const ChatTemplate& chat_template);

size_t common_prefix_length(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// `ids` with the loss on every token from `prompt_length` on, cut to max_length (TRL's keep_start
// truncation; max_length <= 0: no limit). nullopt when the prompt leaves no completion token.
// `truncated` is set when tokens were cut.
std::optional<TokenizedSample> trl_completion_sample(std::vector<int64_t> ids, size_t prompt_length, int64_t max_length,
                                                     int64_t line, bool* truncated = nullptr);

}  // namespace ferry
