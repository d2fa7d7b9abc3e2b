// A model's Jinja chat template: rendering as transformers does, loss spans, tokenisation.
#include "src/tokenizer/jinja_chat_template.h"

#include <algorithm>

#include "core/error.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// transformers' special_tokens_map: the named special tokens the folder sets.
nlohmann::ordered_json special_tokens_map(const HfTokenizerConfig& hf) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
      {"bos_token", &hf.bos_token}, {"eos_token", &hf.eos_token},   {"unk_token", &hf.unk_token},
      {"sep_token", &hf.sep_token}, {"pad_token", &hf.pad_token},   {"cls_token", &hf.cls_token},
      {"mask_token", &hf.mask_token}};
  for (const auto& [name, value] : tokens) {
    if (value->has_value()) out[name] = **value;
  }
  return out;
}

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

JinjaChatTemplate::JinjaChatTemplate(const std::vector<HfChatTemplate>& templates,
                                     const HfTokenizerConfig& special_tokens, nlohmann::ordered_json kwargs)
    : globals_(special_tokens_map(special_tokens)) {
  FERRY_CHECK(!templates.empty(), "a Jinja chat template needs a source");
  for (const HfChatTemplate& t : templates) {
    sources_.push_back({t.name, t.file, jinja::Template::parse(t.source, t.file),
                        t.source.find("content") != std::string::npos});
    source_text_ += t.source;
  }
  if (!kwargs.is_null()) {
    FERRY_CHECK(kwargs.is_object(), "chat template keywords must be a JSON object");
    for (const auto& [key, value] : kwargs.items()) globals_[key] = value;
  }
  // The end-of-turn text: what follows a probe answer in a one-round conversation.
  const std::string answer = "ferry-probe-answer";
  Conversation probe{{ChatRole::user, "ferry-probe-question"}, {ChatRole::assistant, answer}};
  try {
    const std::string text = render(sources_.front(), probe, probe.size(), {}, false).text;
    if (const size_t at = text.rfind(answer); at != std::string::npos) end_of_turn_ = text.substr(at + answer.size());
  } catch (const InputError&) {  // a template that refuses the probe (it needs a system message, ...)
  }
  if (end_of_turn_.empty() && special_tokens.eos_token) end_of_turn_ = *special_tokens.eos_token;
}

const JinjaChatTemplate::Source& JinjaChatTemplate::pick(const ChatContext& context) const {
  if (!context.tools.is_null()) {
    for (const Source& s : sources_) {
      if (s.name == "tool_use") return s;
    }
  }
  return sources_.front();
}

jinja::RenderResult JinjaChatTemplate::render(const Source& source, const Conversation& conversation, size_t count,
                                              const ChatContext& context, bool generation_prompt) const {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < count; ++i) messages.push_back(conversation[i].to_template_json());
  nlohmann::ordered_json variables = nlohmann::ordered_json::object();
  variables["messages"] = std::move(messages);
  variables["tools"] = context.tools;
  variables["documents"] = context.documents;
  variables["add_generation_prompt"] = generation_prompt;
  for (const auto& [key, value] : globals_.items()) variables[key] = value;
  return source.tmpl.render(variables);
}

std::string JinjaChatTemplate::render_text(const Conversation& conversation, const ChatContext& context,
                                           RenderEnd end) const {
  if (end != RenderEnd::continue_final_message) {
    const bool generation_prompt = end == RenderEnd::generation_prompt;
    check_conversation(conversation, generation_prompt ? ConversationEnd::user : ConversationEnd::assistant);
    return render(pick(context), conversation, conversation.size(), context, generation_prompt).text;
  }
  // transformers' continue_final_message: a tag after the final message's content, the text cut
  // where the template wrote it (and right-stripped where the template trimmed the space after it).
  check_conversation(conversation, ConversationEnd::continued);
  const Source& source = pick(context);
  if (!source.reads_content) {
    throw InputError(source.file + ": continue_final_message is set to \"content\" but this is not an accepted "
                     "field in the chat template");
  }
  static const std::string kTag = "CONTINUE_FINAL_MESSAGE_TAG ";
  const std::string_view tag_word = std::string_view(kTag).substr(0, kTag.size() - 1);
  Conversation tagged = conversation;
  tagged.back().content += kTag;
  std::string text = render(source, tagged, tagged.size(), context, false).text;
  const std::string final_message = jinja::pystr::strip(conversation.back().content, true, true);
  const size_t at = text.rfind(tag_word);
  if (text.find(final_message) == std::string::npos || at == std::string::npos) {
    throw InputError(source.file + ": continue_final_message is set but the final message does not appear in the "
                     "chat after applying the chat template (the template deletes part of it), so there is no "
                     "place to continue from");
  }
  const bool spaced = text.compare(at, kTag.size(), kTag) == 0;
  text.resize(at);
  return spaced ? text : jinja::pystr::strip(text, false, true);
}

RenderedConversation JinjaChatTemplate::render_training(const Conversation& conversation,
                                                        const ChatContext& context) const {
  check_conversation(conversation, ConversationEnd::assistant);
  const Source& source = pick(context);
  jinja::RenderResult whole = render(source, conversation, conversation.size(), context, false);
  RenderedConversation out{std::move(whole.text), std::move(whole.generation_spans), {}};
  // A prefix's rendering, or nullopt when the template refuses it (some raise unless the
  // conversation ends a certain way).
  auto render_prefix = [&](size_t count, bool generation_prompt) -> std::optional<std::string> {
    try {
      return render(source, conversation, count, context, generation_prompt).text;
    } catch (const InputError&) {
      return std::nullopt;
    }
  };
  const bool marked = !out.trained_spans.empty();
  for (size_t i = 0; i < conversation.size() && !marked; ++i) {
    if (conversation[i].role != ChatRole::assistant) continue;
    const auto prompt = render_prefix(i, true);
    const auto answered = render_prefix(i + 1, false);
    if (!prompt || !answered || !starts_with(out.text, *answered)) continue;
    const size_t start = common_prefix(*prompt, *answered);
    // The answer starts where the prompt and the answered conversation part, which must be inside
    // the new turn: the prompt is a prefix, or they part after what the earlier turns render.
    bool inside = start == prompt->size();
    if (!inside) {
      const auto before = render_prefix(i, false);
      inside = before && starts_with(*answered, *before) && start >= before->size();
    }
    if (inside && answered->size() > start) out.trained_spans.emplace_back(start, answered->size());
  }
  if (out.trained_spans.empty()) {
    throw InputError(source.file + ": no assistant message of this conversation can be located in what the chat "
                     "template renders (it has no {% generation %} blocks, and rendering the conversation up to "
                     "each answer does not give a prefix of the whole), so there is nothing to train on; use a "
                     "template with {% generation %} blocks or a shipped template (tokenizer.chat_template)");
  }
  // Round ends: where the conversation up to each later user message renders as a prefix of the
  // whole. Where it does not (a template that rewrites earlier turns), the round is merged into the
  // next: a truncated sample is always text the template renders.
  size_t previous = 0;
  const size_t first = conversation[0].role == ChatRole::system ? 1 : 0;
  for (size_t next = first + 1; next < conversation.size(); ++next) {
    if (conversation[next].role != ChatRole::user) continue;
    const auto rounds = render_prefix(next, false);
    if (rounds && rounds->size() > previous && starts_with(out.text, *rounds)) {
      previous = rounds->size();
      out.round_end_bytes.push_back(previous);
    }
  }
  out.round_end_bytes.push_back(out.text.size());
  return out;
}

TokenizedConversation JinjaChatTemplate::apply(const Conversation& conversation, const ChatContext& context,
                                               const Tokenizer& tokenizer) const {
  const RenderedConversation rendered = render_training(conversation, context);
  TokenizedConversation out;
  size_t span = 0;
  std::vector<size_t> token_starts;
  for (const TokenSpan& token : tokenizer.encode_with_control_pieces_and_offsets(rendered.text)) {
    // transformers' rule: a token is trained when it overlaps a span (token_end > span_begin and
    // token_begin < span_end).
    while (span < rendered.trained_spans.size() && token.begin >= rendered.trained_spans[span].second) ++span;
    const bool trained = span < rendered.trained_spans.size() && token.end > rendered.trained_spans[span].first;
    out.ids.push_back(token.id);
    out.loss_mask.push_back(trained ? 1 : 0);
    token_starts.push_back(token.begin);
  }
  // A round ends after the last token that starts inside it.
  for (const size_t end_byte : rendered.round_end_bytes) {
    out.round_ends.push_back(static_cast<size_t>(
        std::lower_bound(token_starts.begin(), token_starts.end(), end_byte) - token_starts.begin()));
  }
  out.round_ends.back() = out.ids.size();
  return out;
}

std::vector<int64_t> JinjaChatTemplate::render_prompt(const Conversation& conversation, const ChatContext& context,
                                                      const Tokenizer& tokenizer, RenderEnd end) const {
  std::vector<int64_t> ids;
  for (const TokenSpan& token : tokenizer.encode_with_control_pieces_and_offsets(render_text(conversation, context, end))) {
    ids.push_back(token.id);
  }
  return ids;
}

}  // namespace ferry
