// TRL's tokenisation of its dataset types (see trl_tokenize.h).
#include "src/data/trl_tokenize.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

bool same_message(const ChatMessage& a, const ChatMessage& b) {
  return a.role == b.role && a.content == b.content && a.content_given == b.content_given && a.fields == b.fields;
}

// TRL's extract_prompt loop over messages: the first differing position; with no difference
// within the shorter list, its last position (where Python's loop variable is left).
size_t message_prompt_length(const Conversation& chosen, const Conversation& rejected) {
  const size_t shorter = std::min(chosen.size(), rejected.size());
  size_t idx = 0;
  for (idx = 0; idx < shorter; ++idx) {
    if (!same_message(chosen[idx], rejected[idx])) return idx;  // (a message never equals TRL's " ")
  }
  return shorter == 0 ? 0 : shorter - 1;
}

// The same loop over characters (Python's str indexing): the first differing character's start,
// moved back over a space before it; with no difference, the start of the shorter text's last
// character. Byte positions agree with character positions wherever the texts agree.
size_t text_prompt_length(const std::string& chosen, const std::string& rejected) {
  const auto char_start = [](const std::string& text, size_t at) {
    while (at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
    return at;
  };
  const size_t shorter = std::min(chosen.size(), rejected.size());
  size_t at = 0;
  while (at < shorter && chosen[at] == rejected[at]) ++at;
  if (at == shorter) {  // no difference: the last character of the shorter one
    const std::string& text = chosen.size() <= rejected.size() ? chosen : rejected;
    return text.empty() ? 0 : char_start(text, text.size() - 1);
  }
  at = char_start(chosen, at);
  if (at == 0) {  // Python's chosen[-1]: a trailing space leaves the last character to the responses
    return !chosen.empty() && chosen.back() == ' ' ? chosen.size() - 1 : 0;
  }
  return chosen[at - 1] == ' ' ? at - 1 : at;
}

}  // namespace

bool is_conversational_row(const nlohmann::ordered_json& row) {
  for (const char* key : {"prompt", "chosen", "rejected", "completion", "messages"}) {
    const auto it = row.find(key);
    if (it == row.end()) continue;
    return it->is_array() && !it->empty() && (*it)[0].is_object() &&
           ((*it)[0].contains("role") || (*it)[0].contains("from"));
  }
  return false;
}

TrlField trl_field(const nlohmann::ordered_json& row, const std::string& key, bool conversational) {
  const auto it = row.find(key);
  if (it == row.end()) throw InputError("missing field \"" + key + "\"");
  TrlField field;
  if (it->is_string()) {
    field.text = it->get<std::string>();
  } else if (it->is_array()) {
    field.conversational = true;
    field.messages = conversation_from_json(row, key);
  } else {
    throw InputError("field \"" + key + "\" must be text or a list of messages");
  }
  if (field.conversational != conversational) {
    throw InputError("field \"" + key + "\" is " + (field.conversational ? "a message list" : "text") +
                     " where the row's other fields are " + (conversational ? "message lists" : "text") +
                     " (a row is standard, all text, or conversational, all messages)");
  }
  return field;
}

TrlField extract_prompt(TrlField& chosen, TrlField& rejected) {
  TrlField prompt;
  prompt.conversational = chosen.conversational;
  if (chosen.conversational) {
    const size_t n = message_prompt_length(chosen.messages, rejected.messages);
    prompt.messages.assign(chosen.messages.begin(), chosen.messages.begin() + static_cast<std::ptrdiff_t>(n));
    chosen.messages.erase(chosen.messages.begin(), chosen.messages.begin() + static_cast<std::ptrdiff_t>(n));
    rejected.messages.erase(rejected.messages.begin(), rejected.messages.begin() + static_cast<std::ptrdiff_t>(n));
  } else {
    const size_t n = text_prompt_length(chosen.text, rejected.text);
    prompt.text = chosen.text.substr(0, n);
    chosen.text.erase(0, n);
    rejected.text.erase(0, std::min(n, rejected.text.size()));
  }
  return prompt;
}

std::string with_eos_text(const std::string& text, const Tokenizer& tokenizer) {
  if (tokenizer.eos_id() < 0) return text;
  const std::string eos = tokenizer.id_to_piece(tokenizer.eos_id());
  if (text.size() >= eos.size() && text.compare(text.size() - eos.size(), eos.size(), eos) == 0) return text;
  return text + eos;
}

std::vector<int64_t> trl_prompt_ids(const TrlField& prompt, const ChatContext& context, const Tokenizer& tokenizer,
                                    const ChatTemplate& chat_template) {
  if (!prompt.conversational) return tokenizer.encode_as_sequence(prompt.text);
  return chat_template.render_prompt(prompt.messages, tokenizer, context, RenderEnd::generation_prompt);
}

std::vector<int64_t> trl_sequence_ids(const TrlField& prompt, const TrlField& completion, const ChatContext& context,
                                      const Tokenizer& tokenizer, const ChatTemplate& chat_template) {
  if (!prompt.conversational) return tokenizer.encode_as_sequence(prompt.text + completion.text);
  Conversation whole = prompt.messages;
  whole.insert(whole.end(), completion.messages.begin(), completion.messages.end());
  return chat_template.apply(whole, tokenizer, context).ids;
}

size_t common_prefix_length(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

std::optional<TokenizedSample> trl_completion_sample(std::vector<int64_t> ids, size_t prompt_length, int64_t max_length,
                                                     int64_t line, bool* truncated) {
  if (truncated != nullptr) *truncated = false;
  if (max_length > 0 && static_cast<int64_t>(prompt_length) >= max_length) return std::nullopt;
  if (prompt_length >= ids.size()) return std::nullopt;
  if (max_length > 0 && static_cast<int64_t>(ids.size()) > max_length) {
    ids.resize(static_cast<size_t>(max_length));
    if (truncated != nullptr) *truncated = true;
  }
  TokenizedSample sample;
  sample.loss_mask.assign(ids.size(), 1);
  std::fill(sample.loss_mask.begin(), sample.loss_mask.begin() + static_cast<std::ptrdiff_t>(prompt_length), 0);
  sample.ids = std::move(ids);
  sample.line = line;
  return sample;
}

}  // namespace ferry
