// Chat templates: strict loading from YAML/JSON, rendering, tokenisation with exact loss masks.
#include "src/tokenizer/chat_template.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "core/file_util.h"
#include "core/text.h"
#include "src/tokenizer/chat_template_path.h"
#include "src/tokenizer/jinja/pystr.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/utf8.h"

namespace ferry {
namespace {

// What a rendered piece of text is, which decides how it is tokenised and masked.
enum class PieceKind {
  marker,         // a template string: control pieces spelled in it become ids; loss 0
  content,        // system or user text; loss 0
  answer,         // assistant text; loss 1
  answer_marker,  // assistant_suffix; loss 1
  round_end,      // no text: a round ends here
};

using Emit = std::function<void(std::string_view text, PieceKind kind)>;

// Python's str.isspace(), which Jinja's `trim` filter (str.strip()) uses: Unicode White_Space
// and the four information separators U+001C..U+001F.
bool is_python_space(char32_t c) { return utf8::is_white_space(c) || (c >= 0x1C && c <= 0x1F); }

// `text` without leading and trailing Python whitespace. Text that is not valid UTF-8 (which a
// Python string cannot hold) loses ASCII whitespace only.
std::string_view trim_python_space(std::string_view text) {
  size_t begin = 0, end = text.size(), length = 0;
  if (utf8::find_invalid(text) != std::string_view::npos) {
    auto ascii_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F); };
    while (begin < end && ascii_space(text[begin])) ++begin;
    while (end > begin && ascii_space(text[end - 1])) --end;
    return text.substr(begin, end - begin);
  }
  while (begin < end && is_python_space(utf8::decode(text, begin, &length))) begin += length;
  while (end > begin && is_python_space(utf8::decode_before(text, end, &length))) end -= length;
  return text.substr(begin, end - begin);
}

std::string location(const std::string& source, const YAML::Node& node) {
  if (node.Mark().line >= 0) return source + ":" + std::to_string(node.Mark().line + 1);
  return source;
}

std::string read_string(const YAML::Node& node, const std::string& where, const std::string& key) {
  if (node.IsNull()) return "";
  if (!node.IsScalar()) throw ConfigError(where + ": " + key + ": expected a string");
  return node.Scalar();
}

bool read_bool(const YAML::Node& node, const std::string& where, const std::string& key) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    throw ConfigError(where + ": " + key + ": expected true or false" +
                      (node.IsScalar() ? ", got '" + node.Scalar() + "'" : std::string()));
  }
  return value;
}

std::vector<std::string> read_string_list(const YAML::Node& node, const std::string& where, const std::string& key) {
  if (node.IsNull()) return {};
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) throw ConfigError(where + ": " + key + ": expected a list of strings");
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) throw ConfigError(location(where, item) + ": " + key + ": expected a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

}  // namespace

const std::vector<std::string>& chat_template_keys() {
  static const std::vector<std::string> keys{"name",
                                             "system_prefix",
                                             "system_suffix",
                                             "user_prefix",
                                             "user_suffix",
                                             "assistant_prefix",
                                             "assistant_suffix",
                                             "generation_prefix",
                                             "default_system",
                                             "always_system",
                                             "trim",
                                             "stop_strings",
                                             "bos",
                                             "system_in_first_user",
                                             "tokenization"};
  return keys;
}

ChatTemplate parse_chat_template(std::string_view text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    throw ConfigError(source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML/JSON: " + e.msg);
  }
  if (!root.IsMap()) {
    throw ConfigError(source + ": a chat template must be a mapping of keys (" + join(chat_template_keys(), ", ") +
                      ")");
  }
  ChatTemplate tmpl;
  tmpl.source = source;
  tmpl.name = std::filesystem::path(source).stem().string();
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    const std::string where = location(source, entry.first);
    const YAML::Node& value = entry.second;
    if (key == "name") {
      tmpl.name = read_string(value, where, key);
    } else if (key == "system_prefix") {
      tmpl.system_prefix = read_string(value, where, key);
    } else if (key == "system_suffix") {
      tmpl.system_suffix = read_string(value, where, key);
    } else if (key == "user_prefix") {
      tmpl.user_prefix = read_string(value, where, key);
    } else if (key == "user_suffix") {
      tmpl.user_suffix = read_string(value, where, key);
    } else if (key == "assistant_prefix") {
      tmpl.assistant_prefix = read_string(value, where, key);
    } else if (key == "assistant_suffix") {
      tmpl.assistant_suffix = read_string(value, where, key);
    } else if (key == "generation_prefix") {
      tmpl.generation_prefix = read_string(value, where, key);
    } else if (key == "default_system") {
      tmpl.default_system = read_string(value, where, key);
    } else if (key == "always_system") {
      tmpl.always_system = read_bool(value, where, key);
    } else if (key == "trim") {
      tmpl.trim = read_bool(value, where, key);
    } else if (key == "stop_strings") {
      tmpl.stop_strings = read_string_list(value, where, key);
    } else if (key == "bos") {
      tmpl.bos = read_bool(value, where, key);
    } else if (key == "system_in_first_user") {
      tmpl.system_in_first_user = read_bool(value, where, key);
    } else if (key == "tokenization") {
      const std::string mode = read_string(value, where, key);
      if (mode == "pieces") {
        tmpl.tokenization = TemplateTokenization::pieces;
      } else if (mode == "whole") {
        tmpl.tokenization = TemplateTokenization::whole;
      } else {
        throw ConfigError(where + ": tokenization: expected pieces or whole, got '" + mode + "'");
      }
    } else {
      throw ConfigError(where + ": unknown chat template key '" + key + "'" + did_you_mean(key, chat_template_keys()) +
                        "; valid keys: " + join(chat_template_keys(), ", "));
    }
  }
  if (tmpl.assistant_suffix.empty()) {
    throw ConfigError(source +
                      ": assistant_suffix must not be empty: it is the end-of-assistant marker the model "
                      "learns to stop at (e.g. \"</s>\" or \"<|end|>\")");
  }
  return tmpl;
}

ChatTemplate load_chat_template(const std::string& name_or_path) {
  const std::string path = find_chat_template(name_or_path);
  std::string text;
  try {
    text = read_file(path);
  } catch (const InputError& e) {
    throw ConfigError(e.what());
  }
  return parse_chat_template(text, path);
}

// Walks the conversation in template order, handing each piece of text to `emit`. Shared by
// render_text and tokenisation so that the two can never disagree.
static void render(const ChatTemplate& t, const Conversation& conversation, RenderEnd end, const Emit& emit) {
  check_conversation(conversation, end == RenderEnd::generation_prompt        ? ConversationEnd::user
                                   : end == RenderEnd::continue_final_message ? ConversationEnd::continued
                                                                              : ConversationEnd::assistant);
  if (has_tool_messages(conversation)) {
    throw InputError("chat template '" + t.name + "' (" + t.source + ") renders role and content only, not tool "
                     "calls or tool messages; use the model's own chat template (tokenizer.chat_template: auto, "
                     "or a .jinja file)");
  }
  size_t next = 0;
  const std::string* system = t.default_system.empty() && !t.always_system ? nullptr : &t.default_system;
  if (conversation[0].role == ChatRole::system) {
    system = &conversation[0].content;
    next = 1;
  }
  auto content = [&](const std::string& text) { return t.trim ? trim_python_space(text) : std::string_view(text); };
  auto emit_system = [&] {
    emit(t.system_prefix, PieceKind::marker);
    emit(content(*system), PieceKind::content);
    emit(t.system_suffix, PieceKind::marker);
  };
  if (system && !t.system_in_first_user) emit_system();
  bool first_round = true;
  for (size_t i = next; i < conversation.size(); i += 2) {
    emit(t.user_prefix, PieceKind::marker);
    if (system && t.system_in_first_user && first_round) emit_system();
    emit(content(conversation[i].content), PieceKind::content);
    emit(t.user_suffix, PieceKind::marker);
    if (i + 1 < conversation.size()) {
      const std::string_view answer = content(conversation[i + 1].content);
      // transformers cuts a continued message after its content, right-stripping the text where the
      // template trims the content: an answer trimmed to nothing loses the header's trailing space.
      const bool open = end == RenderEnd::continue_final_message && i + 2 >= conversation.size();
      emit(open && t.trim && answer.empty() ? jinja::pystr::strip(t.assistant_prefix, false, true) : t.assistant_prefix,
           PieceKind::marker);
      emit(answer, PieceKind::answer);
      // A continued final message stays open: the model writes the rest and the end marker.
      if (end != RenderEnd::continue_final_message || i + 2 < conversation.size()) {
        emit(t.assistant_suffix, PieceKind::answer_marker);
      }
    } else {  // a generation prompt: the model writes the answer
      emit(t.generation_prefix.value_or(t.assistant_prefix), PieceKind::marker);
    }
    emit({}, PieceKind::round_end);
    first_round = false;
  }
}

// A shipped template takes no tools or documents.
static void check_no_context(const ChatTemplate& t, const ChatContext& context) {
  if (context.empty()) return;
  throw InputError("chat template '" + t.name + "' (" + t.source + ") does not render tools or documents; use the "
                   "model's own chat template (tokenizer.chat_template: auto, or a .jinja file)");
}

std::string ChatTemplate::render_text(const Conversation& conversation, bool generation_prompt,
                                      const ChatContext& context) const {
  return render_text(conversation, generation_prompt ? RenderEnd::generation_prompt : RenderEnd::closed, context);
}

std::string ChatTemplate::render_text(const Conversation& conversation, RenderEnd end,
                                      const ChatContext& context) const {
  if (jinja) return jinja->render_text(conversation, context, end);
  check_no_context(*this, context);
  std::string out;
  render(*this, conversation, end, [&](std::string_view text, PieceKind) { out += text; });
  return out;
}

static void push_bos(const ChatTemplate& t, const Tokenizer& tokenizer, TokenizedConversation& out) {
  if (!t.bos) return;
  if (tokenizer.bos_id() < 0) {
    throw ConfigError(t.source + ": bos: true, but tokenizer '" + tokenizer.path() +
                      "' has no BOS token; set bos: false in the template");
  }
  out.ids.push_back(tokenizer.bos_id());
  out.loss_mask.push_back(0);
}

// tokenization: pieces. Each piece is encoded on its own; its mask is its kind's.
static TokenizedConversation tokenize_pieces(const ChatTemplate& t, const Conversation& conversation,
                                             RenderEnd end, const Tokenizer& tokenizer) {
  TokenizedConversation out;
  push_bos(t, tokenizer, out);
  render(t, conversation, end, [&](std::string_view text, PieceKind kind) {
    if (kind == PieceKind::round_end) {
      out.round_ends.push_back(out.ids.size());
      return;
    }
    if (text.empty()) return;
    const bool is_marker = kind == PieceKind::marker || kind == PieceKind::answer_marker;
    const auto ids = is_marker ? tokenizer.encode_with_control_pieces(text) : tokenizer.encode(text);
    const uint8_t mask = kind == PieceKind::answer || kind == PieceKind::answer_marker ? 1 : 0;
    out.ids.insert(out.ids.end(), ids.begin(), ids.end());
    out.loss_mask.insert(out.loss_mask.end(), ids.size(), mask);
  });
  return out;
}

// tokenization: whole. The rendered text is cut only at control pieces written in template
// strings; each stretch between them is encoded at once and its tokens masked by the bytes they
// stand for.
static TokenizedConversation tokenize_whole(const ChatTemplate& t, const Conversation& conversation,
                                            RenderEnd end, const Tokenizer& tokenizer) {
  std::string text;
  std::vector<uint8_t> byte_mask;                  // per byte of text: 1 inside an answer or its end marker
  std::vector<std::pair<size_t, size_t>> markers;  // byte ranges of template strings
  std::vector<size_t> round_end_bytes;
  render(t, conversation, end, [&](std::string_view piece, PieceKind kind) {
    if (kind == PieceKind::round_end) {
      round_end_bytes.push_back(text.size());
      return;
    }
    const uint8_t mask = kind == PieceKind::answer || kind == PieceKind::answer_marker ? 1 : 0;
    if (kind == PieceKind::marker || kind == PieceKind::answer_marker)
      markers.emplace_back(text.size(), text.size() + piece.size());
    text += piece;
    byte_mask.insert(byte_mask.end(), piece.size(), mask);
  });

  struct ControlCut {
    size_t begin, end;
    int64_t id;
  };
  std::vector<ControlCut> cuts;
  for (const auto& [begin, end] : markers) {
    size_t pos = begin;
    while (pos < end) {
      bool matched = false;
      for (const auto& [piece, id] : tokenizer.control_pieces()) {
        if (pos + piece.size() <= end && text.compare(pos, piece.size(), piece) == 0) {
          cuts.push_back({pos, pos + piece.size(), id});
          pos += piece.size();
          matched = true;
          break;
        }
      }
      if (!matched) ++pos;
    }
  }

  TokenizedConversation out;
  push_bos(t, tokenizer, out);
  std::vector<size_t> token_starts(out.ids.size(), 0);  // first byte of each token, for round ends
  auto encode_stretch = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    uint8_t last_mask = byte_mask[begin];
    for (const TokenSpan& span : tokenizer.encode_with_offsets(std::string_view(text).substr(begin, end - begin))) {
      uint8_t mask = last_mask;  // a token owning no bytes (dummy prefix, byte-fallback tail) follows its neighbour
      if (span.end > span.begin) {
        mask = 0;
        for (size_t b = begin + span.begin; b < begin + span.end && b < end; ++b) mask |= byte_mask[b];
      }
      out.ids.push_back(span.id);
      out.loss_mask.push_back(mask);
      token_starts.push_back(begin + span.begin);
      last_mask = mask;
    }
  };
  size_t cursor = 0;
  for (const ControlCut& cut : cuts) {
    encode_stretch(cursor, cut.begin);
    out.ids.push_back(cut.id);
    out.loss_mask.push_back(byte_mask[cut.begin]);
    token_starts.push_back(cut.begin);
    cursor = cut.end;
  }
  encode_stretch(cursor, text.size());

  // A round ends after the last token that starts inside it; the BOS belongs to the first round.
  for (const size_t end_byte : round_end_bytes) {
    size_t n = t.bos ? 1 : 0;
    while (n < token_starts.size() && token_starts[n] < end_byte) ++n;
    out.round_ends.push_back(n);
  }
  return out;
}

static TokenizedConversation tokenize(const ChatTemplate& t, const Conversation& conversation, RenderEnd end,
                                      const Tokenizer& tokenizer) {
  return t.tokenization == TemplateTokenization::whole ? tokenize_whole(t, conversation, end, tokenizer)
                                                       : tokenize_pieces(t, conversation, end, tokenizer);
}

TokenizedConversation ChatTemplate::apply(const Conversation& conversation, const Tokenizer& tokenizer,
                                         const ChatContext& context) const {
  if (jinja) return jinja->apply(conversation, context, tokenizer);
  check_no_context(*this, context);
  return tokenize(*this, conversation, RenderEnd::closed, tokenizer);
}

std::vector<int64_t> ChatTemplate::render_prompt(const Conversation& conversation, const Tokenizer& tokenizer,
                                                 const ChatContext& context, RenderEnd end) const {
  FERRY_CHECK(end != RenderEnd::closed, "a prompt ends with a generation prompt or an open final message");
  if (jinja) return jinja->render_prompt(conversation, context, tokenizer, end);
  check_no_context(*this, context);
  return tokenize(*this, conversation, end, tokenizer).ids;
}

std::vector<int64_t> ChatTemplate::stop_token_ids(const Tokenizer& tokenizer) const {
  std::vector<int64_t> ids;
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  auto add = [&](const std::string& text) {
    const auto encoded = tokenizer.encode_with_control_pieces(text);
    if (encoded.size() == 1 && std::find(ids.begin(), ids.end(), encoded[0]) == ids.end()) ids.push_back(encoded[0]);
  };
  // A Jinja template's end of turn ("<|im_end|>\n") stops at its first token when that is a control
  // token (the newline after it is the template's, not the model's).
  if (jinja) {
    const auto encoded = tokenizer.encode_with_control_pieces(assistant_suffix);
    if (!encoded.empty() && tokenizer.is_control(encoded[0]) &&
        std::find(ids.begin(), ids.end(), encoded[0]) == ids.end()) {
      ids.push_back(encoded[0]);
    }
  }
  add(assistant_suffix);
  for (const auto& s : stop_strings) add(s);
  return ids;
}

TokenizedConversation TokenizedConversation::first_rounds(size_t rounds) const {
  FERRY_CHECK(rounds > 0 && rounds <= round_ends.size(), "rounds=", rounds, " of ", round_ends.size());
  TokenizedConversation out;
  const size_t end = round_ends[rounds - 1];
  out.ids.assign(ids.begin(), ids.begin() + end);
  out.loss_mask.assign(loss_mask.begin(), loss_mask.begin() + end);
  out.round_ends.assign(round_ends.begin(), round_ends.begin() + rounds);
  return out;
}

}  // namespace ferry
