// A model's own chat template: the Jinja source a Hugging Face model folder carries (or a .jinja
// file), rendered by ferry::jinja exactly as transformers' apply_chat_template renders it, then
// tokenised as transformers tokenises it (the whole text, add_special_tokens=False: special tokens
// the text spells become their ids, no BOS added — the template writes it).
//
// The template sees what transformers passes: `messages` (each message's JSON object), `tools`,
// `documents`, `add_generation_prompt`, the folder's special tokens (bos_token, eos_token,
// pad_token, unk_token, ...) and the config's extra keywords (tokenizer.chat_template_kwargs).
//
// The loss mask covers what the model must learn to write:
//  - where the template marks it with {% generation %} blocks, exactly those bytes (transformers'
//    return_assistant_tokens_mask);
//  - elsewhere each assistant message's rendering plus the end-of-turn text after it, found by
//    rendering growing prefixes: P = messages[:i] with a generation prompt, Q = messages[:i+1]
//    and R = messages[:i] without. Message i's span runs from where P and Q part to the end of Q,
//    when Q is a prefix of the whole text and either P is a prefix of Q or they part after R (a
//    prefix of Q): a generation prompt may differ from the turn's own header only there (layout
//    whitespace after it, a "<think>" opener the answer does not have).
//    A turn whose prefixes are not consistent (a template that rewrites earlier turns, such as one
//    dropping earlier reasoning) is not trained; the last turn always is for such templates. No
//    turn at all is an InputError naming the template.
// A token is trained when it overlaps a masked byte.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/tokenizer/chat_message.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/hf_tokenizer_config.h"
#include "src/tokenizer/jinja/template.h"

namespace ferry {

class Tokenizer;

// Rendered text and the byte spans the loss covers.
struct RenderedConversation {
  std::string text;
  std::vector<std::pair<size_t, size_t>> trained_spans;  // [begin, end) bytes, in order
  // Where each round (a user message and what answers it) ends; rounds whose end the template does
  // not render as a prefix of the whole are merged into the next. The last is text.size().
  std::vector<size_t> round_end_bytes;
};

class JinjaChatTemplate {
 public:
  // `templates`: the one to use, or a folder's "default" and "tool_use" pair, of which "tool_use"
  // renders conversations that come with tools (as transformers picks it). `special_tokens` are
  // the folder's; `kwargs` (a JSON object) override them. Throws TemplateError for a source that
  // does not parse.
  JinjaChatTemplate(const std::vector<HfChatTemplate>& templates, const HfTokenizerConfig& special_tokens,
                    nlohmann::ordered_json kwargs);

  // The text apply_chat_template(tokenize=False) gives: with `end` closed add_generation_prompt=False,
  // generation_prompt True, continue_final_message continue_final_message=True (transformers' way:
  // the final message's content is rendered with a marker after it and the text cut there; an
  // InputError, as transformers' ValueError, when the template does not read `content` or the
  // rendering loses the final message or the marker).
  std::string render_text(const Conversation& conversation, const ChatContext& context, RenderEnd end) const;
  // A training conversation's text, trained spans and round ends.
  RenderedConversation render_training(const Conversation& conversation, const ChatContext& context) const;

  TokenizedConversation apply(const Conversation& conversation, const ChatContext& context,
                              const Tokenizer& tokenizer) const;
  std::vector<int64_t> render_prompt(const Conversation& conversation, const ChatContext& context,
                                     const Tokenizer& tokenizer, RenderEnd end) const;

  // What the template writes after an assistant answer ("<|im_end|>\n", "<|eot_id|>"), found by
  // rendering a probe conversation; the EOS token's text when that fails or is empty.
  const std::string& end_of_turn() const { return end_of_turn_; }
  // The file the (default) template was read from.
  const std::string& file() const { return sources_.front().file; }
  // Every template's source, one after the other (what tool-call formats are recognised by).
  const std::string& source_text() const { return source_text_; }

 private:
  struct Source {
    std::string name, file;
    jinja::Template tmpl;
    bool reads_content = false;  // the source spells "content" (transformers' continue_final_message check)
  };
  const Source& pick(const ChatContext& context) const;
  jinja::RenderResult render(const Source& source, const Conversation& conversation, size_t count,
                             const ChatContext& context, bool generation_prompt) const;

  std::vector<Source> sources_;  // sources_[0] is the default
  nlohmann::ordered_json globals_;
  std::string end_of_turn_;
  std::string source_text_;
};

}  // namespace ferry
