// Chat templates: how a conversation becomes token ids, and which of them the loss is taken on.
//
// A ChatTemplate is either a model's own Jinja template (`jinja`, see jinja_chat_template.h: what
// `tokenizer.chat_template: auto` gives for a Hugging Face folder), which apply/render_prompt/
// render_text hand over to, or a shipped one: a a small YAML or JSON file (configs/templates/*.yaml) of plain strings around each
// message:
//
//   [BOS] system_prefix SYSTEM system_suffix
//         user_prefix USER user_suffix assistant_prefix ANSWER assistant_suffix   (one per round)
//
// With `system_in_first_user` (Llama-2-chat) the system block goes inside the first user turn,
// right after user_prefix. Template strings may name control pieces literally ("<s>", "</s>"):
// they become those ids. Message contents never do: a user who types "</s>" gets text.
//
// Each piece (prefix, content, suffix) is tokenised on its own and the ids are concatenated.
// That is what makes the loss mask exact: a token never straddles a marker and the content next
// to it. With the demo tokenizer this gives the same ids as encoding the whole rendered text,
// because every marker is one user-defined piece and no dummy prefix is added.
//
// `tokenization: whole` instead encodes each stretch of text between control pieces at once, as
// Meta's and Hugging Face's Llama code do, and masks by bytes: a token is trained when any byte
// it stands for belongs to an assistant answer or its end marker. Use it for tokenizers that add a
// dummy prefix (Llama's): piece by piece, every piece would start with its own "▁", so where a
// template puts a space at a piece boundary (Llama-2-chat's "[INST] " + USER) the ids would
// differ from what the model was trained on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/tokenizer/chat_message.h"

namespace ferry {

class JinjaChatTemplate;
class Tokenizer;

// A conversation as ids, with the loss mask and the round boundaries a data loader needs to
// truncate without cutting a round in half.
struct TokenizedConversation {
  std::vector<int64_t> ids;
  // 1 exactly on the tokens of each assistant message's content and of the assistant_suffix
  // after it (the end-of-assistant marker, so the model learns to stop); 0 on BOS, system and
  // user messages and all other template strings.
  std::vector<uint8_t> loss_mask;
  // ids.size() after each round (a user message and the assistant answer to it). The first round
  // also holds BOS and the system message. Keeping ids[0, round_ends[k]) keeps whole rounds.
  std::vector<size_t> round_ends;

  // The first `rounds` rounds (0 < rounds <= round_ends.size()).
  TokenizedConversation first_rounds(size_t rounds) const;
};

// Where a rendered conversation ends, as apply_chat_template's options say:
enum class RenderEnd {
  closed,                  // after the last (assistant) message and its end of turn (training)
  generation_prompt,       // add_generation_prompt=True: after the header of a new assistant turn
  continue_final_message,  // continue_final_message=True: inside the last (assistant) message, left
                           // open for the model to continue (a prefilled answer; no end of turn)
};

enum class TemplateTokenization {
  pieces,  // each prefix, message and suffix on its own (exact masks by construction)
  whole,   // each stretch of text between control pieces at once; masks by byte ownership
};

struct ChatTemplate {
  std::string name;
  std::string system_prefix, system_suffix;
  std::string user_prefix, user_suffix;
  // assistant_suffix is the end-of-assistant marker: trained, and where generation stops.
  std::string assistant_prefix, assistant_suffix;
  // What a generation prompt ends with, when it differs from assistant_prefix: Llama-2-chat
  // trains on "[/INST] answer" but prompts end at "[/INST]" (the answer's first token carries
  // the space).
  std::optional<std::string> generation_prefix;
  // Used when a conversation has no system message (empty: none).
  std::string default_system;
  // Render the system block even when there is no system message and default_system is empty
  // (Llama 3.1/3.2: system_prefix holds the "Cutting Knowledge Date" header every prompt has).
  bool always_system = false;
  // Strip leading and trailing whitespace from every message's content, as the `| trim` filter in
  // Llama 3's Jinja templates does (Python's str.strip(): Unicode whitespace).
  bool trim = false;
  // Generation stops at any of these (EOS always stops it).
  std::vector<std::string> stop_strings;
  // Prepend the tokenizer's BOS id.
  bool bos = true;
  // Llama-2-chat: the system block goes inside the first user turn, after user_prefix.
  bool system_in_first_user = false;
  TemplateTokenization tokenization = TemplateTokenization::pieces;
  // The file it was read from, for messages.
  std::string source;
  // Set for a model's own Jinja template: it renders and tokenises everything, and the fields
  // above only name it (assistant_suffix: the end-of-turn text it writes after an answer; bos:
  // false, the template writes BOS itself).
  std::shared_ptr<const JinjaChatTemplate> jinja;

  // Ids, loss mask and round ends of a training conversation (it must end with an assistant
  // message). Throws InputError for a conversation in the wrong order (see check_conversation),
  // and, for a shipped template, for tool messages or tools, which only Jinja templates render.
  TokenizedConversation apply(const Conversation& conversation, const Tokenizer& tokenizer,
                              const ChatContext& context = {}) const;

  // Ids of a prompt for generation: the conversation (ending with a user message) followed by
  // generation_prefix (default: assistant_prefix), so the model's next token starts the answer;
  // or, with RenderEnd::continue_final_message, the conversation (ending with an assistant message)
  // without the end of its last turn, so the model's next token continues that message.
  std::vector<int64_t> render_prompt(const Conversation& conversation, const Tokenizer& tokenizer,
                                     const ChatContext& context = {},
                                     RenderEnd end = RenderEnd::generation_prompt) const;

  // The rendered text, for debugging and tests: what apply() tokenises piece by piece, without
  // the BOS id (`bos`), which is a token rather than text. With `generation_prompt` the
  // conversation must end with a user message and generation_prefix is appended.
  std::string render_text(const Conversation& conversation, bool generation_prompt = false,
                          const ChatContext& context = {}) const;
  std::string render_text(const Conversation& conversation, RenderEnd end, const ChatContext& context = {}) const;

  // Ids that end generation: EOS and every stop string that is a single token.
  std::vector<int64_t> stop_token_ids(const Tokenizer& tokenizer) const;
};

// Parses template text (YAML or JSON). Strict: an unknown key is a ConfigError naming `source`,
// the line and the closest valid key. `source` names the file in messages; the template's name
// defaults to the file's stem.
ChatTemplate parse_chat_template(std::string_view text, const std::string& source);

// Loads a shipped template by name ("demo", "llama3", "qwen2.5", ...) or a .yaml/.yml/.json file
// (see find_chat_template). Throws ConfigError. For `auto` and Jinja templates, see
// resolve_chat_template (chat_template_resolve.h).
ChatTemplate load_chat_template(const std::string& name_or_path);

// The keys a template file may have, for documentation and suggestions.
const std::vector<std::string>& chat_template_keys();

}  // namespace ferry
