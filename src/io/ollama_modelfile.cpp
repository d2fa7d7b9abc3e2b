// Ollama Modelfiles and Go templates from a model's chat template (see ollama_modelfile.h).
#include "src/io/ollama_modelfile.h"

#include <algorithm>

#include "core/error.h"
#include "src/tokenizer/chat_template.h"

namespace ferry::io {
namespace {

// Probe contents: plain words no template changes (no whitespace to trim, no markup).
const char* const kSystem = "QZXSYSTEMQZX";
const char* const kUser[] = {"QZXUSERONEQZX", "QZXUSERTWOQZX", "QZXUSERTHREEQZX"};
const char* const kAnswer[] = {"QZXANSWERONEQZX", "QZXANSWERTWOQZX"};

using Messages = std::vector<std::pair<std::string, std::string>>;

Conversation conversation_of(const Messages& messages) {
  Conversation out;
  for (const auto& [role, content] : messages) {
    out.push_back(ChatMessage{*parse_chat_role(role), content});
  }
  return out;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The text between marker `a` (or the start) and marker `b` (or the end) of `text`; nullopt when a
// marker is missing or out of order.
std::optional<std::string> between(const std::string& text, const char* a, const char* b) {
  size_t begin = 0;
  if (a != nullptr) {
    const size_t at = text.find(a);
    if (at == std::string::npos) return std::nullopt;
    begin = at + std::string(a).size();
  }
  size_t end = text.size();
  if (b != nullptr) {
    end = text.find(b, begin);
    if (end == std::string::npos) return std::nullopt;
  }
  return text.substr(begin, end - begin);
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string trim(std::string text) {
  while (!text.empty() && is_space(text.back())) text.pop_back();
  size_t first = 0;
  while (first < text.size() && is_space(text[first])) ++first;
  return text.substr(first);
}

// The length of the marker at `at` ("<|im_end|>", "</s>", "<｜end▁of▁sentence｜>": "<", no space or
// angle bracket, ">"), or 0 when none starts there.
size_t marker_length(const std::string& text, size_t at) {
  if (at >= text.size() || text[at] != '<') return 0;
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (text[i] == '>') return i > at + 1 ? i - at + 1 : 0;
    if (text[i] == '<' || is_space(text[i])) return 0;
  }
  return 0;
}

// The first whole thing `text` (what a template writes after an answer) holds: a marker, or plain
// text up to the end of its line or the next marker, trimmed ("### User:"); empty when it is blank.
// Taking whole markers is the point: the end of an answer read as the text two renderings share
// can stop inside one ("<" where one writes "</s>" and the other "<|message_sep|>").
std::string first_stop(const std::string& text) {
  size_t begin = 0;
  while (begin < text.size() && is_space(text[begin])) ++begin;
  if (const size_t length = marker_length(text, begin); length > 0) return text.substr(begin, length);
  size_t end = begin;
  while (end < text.size() && text[end] != '\n' && (end == begin || marker_length(text, end) == 0)) ++end;
  return trim(text.substr(begin, end - begin));
}

}  // namespace

std::string OllamaTemplate::go_template() const {
  // No trim markers ({{- / -}}): every piece is written exactly as the chat template writes it.
  // System messages reach the template as .System and are skipped in .Messages.
  std::string out;
  if (system_layout == OllamaSystemLayout::block) {
    out += "{{ if .System }}" + system_prefix + "{{ .System }}" + system_suffix + "{{ else }}" + no_system + "{{ end }}";
  } else {
    out += no_system;
  }
  if (system_layout == OllamaSystemLayout::first_user) out += "{{ $system := .System }}";
  out += "{{ range $i, $_ := .Messages }}{{ $last := eq (len (slice $.Messages $i)) 1 }}"
         "{{ if eq .Role \"user\" }}" + user_prefix;
  if (system_layout == OllamaSystemLayout::first_user) {
    out += "{{ if $system }}" + system_prefix + "{{ $system }}" + system_suffix + "{{ $system = \"\" }}{{ end }}";
  }
  out += "{{ .Content }}{{ if $last }}" + user_then_generation + "{{ else }}" + user_then_answer +
         "{{ end }}{{ else if eq .Role \"assistant\" }}{{ .Content }}{{ if not $last }}" + answer_end +
         "{{ end }}{{ end }}{{ end }}";
  return out;
}

std::string render_ollama_pieces(const OllamaTemplate& p, const Messages& messages) {
  std::string out;
  const auto found = std::find_if(messages.begin(), messages.end(), [](const auto& m) { return m.first == "system"; });
  std::string system = found != messages.end() ? found->second : std::string();
  if (p.system_layout == OllamaSystemLayout::block) {
    out += !system.empty() ? p.system_prefix + system + p.system_suffix : p.no_system;
  } else {
    out += p.no_system;
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const bool last = i + 1 == messages.size();
    const auto& [role, content] = messages[i];
    if (role == "user") {
      out += p.user_prefix;
      if (p.system_layout == OllamaSystemLayout::first_user && !system.empty()) {
        out += p.system_prefix + system + p.system_suffix;
        system.clear();
      }
      out += content + (last ? p.user_then_generation : p.user_then_answer);
    }
    if (role == "assistant") out += content + (last ? "" : p.answer_end);
  }
  return out;
}

std::optional<OllamaTemplate> infer_ollama_template(const ChatTemplate& t, const std::string& bos_text,
                                                    std::string* why) {
  const auto fail = [&](const std::string& reason) -> std::optional<OllamaTemplate> {
    if (why != nullptr) *why = reason;
    return std::nullopt;
  };
  const auto render = [&](const Messages& messages, RenderEnd end) {
    std::string text = t.render_text(conversation_of(messages), end);
    if (!bos_text.empty() && starts_with(text, bos_text)) text.erase(0, bos_text.size());
    return text;
  };
  const Messages with_system{{"system", kSystem}, {"user", kUser[0]}, {"assistant", kAnswer[0]}, {"user", kUser[1]}};
  const Messages without{{"user", kUser[0]}};
  const Messages long_one{{"user", kUser[0]}, {"assistant", kAnswer[0]}, {"user", kUser[1]},
                          {"assistant", kAnswer[1]}, {"user", kUser[2]}};
  std::string g2, g3, closed;
  std::optional<std::string> g4;  // [system, user]: nullopt when the template refuses system messages
  try {
    g2 = render(without, RenderEnd::generation_prompt);
    g3 = render(long_one, RenderEnd::generation_prompt);
    closed = render({{"user", kUser[0]}, {"assistant", kAnswer[0]}}, RenderEnd::closed);
  } catch (const Error& e) {
    return fail(std::string("the template refuses a probe conversation: ") + e.what());
  }
  try {
    g4 = render({{"system", kSystem}, {"user", kUser[0]}}, RenderEnd::generation_prompt);
  } catch (const Error&) {
  }
  OllamaTemplate p;
  // The turns without a system message first: [user] and [user, answer, user, ...].
  const auto ua = between(g3, kUser[0], kAnswer[0]), a_to_u = between(g3, kAnswer[0], kUser[1]),
             ug = between(g2, kUser[0], nullptr), before_user = between(g2, nullptr, kUser[0]),
             final_end = between(closed, kAnswer[0], nullptr);
  if (!ua || !a_to_u || !ug || !before_user || !final_end) return fail("its renderings do not keep every message, in order");
  // The end of an answer is what a closed conversation ends with; the user prefix follows it.
  std::string answer_end = *final_end;
  while (!answer_end.empty() && !starts_with(*a_to_u, answer_end)) answer_end.pop_back();
  if (answer_end.empty() && !final_end->empty()) return fail("an answer's end differs inside and at the end");
  p.answer_end = answer_end;
  p.user_prefix = a_to_u->substr(answer_end.size());
  if (!ends_with(*before_user, p.user_prefix)) return fail("the first user turn starts differently from the others");
  p.no_system = before_user->substr(0, before_user->size() - p.user_prefix.size());
  p.user_then_answer = *ua;
  p.user_then_generation = *ug;
  // Then where the system message goes: a block of its own, inside the first user turn, or nowhere.
  if (!g4) {
    p.system_layout = OllamaSystemLayout::none;
  } else if (const auto sp = between(*g4, nullptr, kSystem), s_to_u = between(*g4, kSystem, kUser[0]);
             !sp || !s_to_u) {
    return fail("it drops or moves the system message");
  } else if (starts_with(*sp, p.no_system + p.user_prefix)) {
    p.system_layout = OllamaSystemLayout::first_user;
    p.system_prefix = sp->substr(p.no_system.size() + p.user_prefix.size());
    p.system_suffix = *s_to_u;
  } else if (ends_with(*s_to_u, p.user_prefix)) {
    p.system_prefix = *sp;
    p.system_suffix = s_to_u->substr(0, s_to_u->size() - p.user_prefix.size());
  } else {
    return fail("the user turn starts differently after the system message");
  }
  for (const std::string* piece : {&p.system_prefix, &p.system_suffix, &p.no_system, &p.user_prefix,
                                   &p.user_then_answer, &p.user_then_generation, &p.answer_end}) {
    if (piece->find("{{") != std::string::npos || piece->find("\"\"\"") != std::string::npos) {
      return fail("a piece holds text a Go template or a Modelfile cannot quote");
    }
  }
  // The pieces must reproduce the template's own renderings.
  for (const Messages& messages :
       {with_system, without, long_one, Messages{{"system", kSystem}, {"user", kUser[0]}}}) {
    if (p.system_layout == OllamaSystemLayout::none && messages.front().first == "system") continue;
    std::string expected;
    try {
      expected = render(messages, RenderEnd::generation_prompt);
    } catch (const Error& e) {
      return fail(std::string("the template refuses a probe conversation: ") + e.what());
    }
    if (render_ollama_pieces(p, messages) != expected) {
      return fail("its pieces do not reproduce its renderings (role- or position-dependent markup)");
    }
  }
  return p;
}

std::vector<std::string> infer_ollama_stops(const ChatTemplate& t, const std::vector<std::string>& end_tokens) {
  std::vector<std::string> stops;
  const auto add = [&](const std::string& stop) {
    if (!stop.empty() && std::find(stops.begin(), stops.end(), stop) == stops.end()) stops.push_back(stop);
  };
  std::optional<std::string> inside, closing;  // after an answer inside a conversation; after the final one
  try {
    const std::string open = t.render_text(
        conversation_of({{"user", kUser[0]}, {"assistant", kAnswer[0]}, {"user", kUser[1]}}), RenderEnd::generation_prompt);
    const std::string closed =
        t.render_text(conversation_of({{"user", kUser[0]}, {"assistant", kAnswer[0]}}), RenderEnd::closed);
    inside = between(open, kAnswer[0], kUser[1]);
    closing = between(closed, kAnswer[0], nullptr);
  } catch (const Error&) {
  }
  if (!inside || !closing) {  // the template refuses the probes or drops the answer
    add(first_stop(t.assistant_suffix));
    for (const std::string& token : end_tokens) add(token);
    return stops;
  }
  // Both: GigaChat 3.5 ends an answer inside a conversation with <|message_sep|> and the final one
  // with EOS; where they agree (<|im_end|>, <end_of_turn>, Phi-3.5's <|end|>) it is one stop. Where
  // a template writes no end of its own, the first thing inside is the next turn's header, whole
  // (GLM's <|user|>, Falcon's "User:"): a model that runs on into a new turn stops there.
  add(first_stop(*inside));
  add(first_stop(*closing));
  // A closed conversation that ends with the answer (GLM, and the plain-text formats, which end it
  // with blank lines) leaves the end of an answer to a token the template does not write: the
  // model's EOS or end-of-turn id (what transformers' generate stops at, from eos_token_id; Ferry's
  // training appends EOS to a turn the template ends with nothing). Ollama stops at the GGUF's EOS
  // by itself; the stops name the other end-of-turn ids too.
  if (trim(*closing).empty()) {
    for (const std::string& token : end_tokens) add(token);
  }
  return stops;
}

std::string modelfile_text(const ModelfileSpec& spec) {
  const auto quoted = [](const std::string& what, const std::string& text) {
    if (text.find("\"\"\"") != std::string::npos) {
      throw InputError(what + " holds \"\"\", which a Modelfile cannot quote");
    }
    return "\"\"\"" + text + "\"\"\"";
  };
  std::string out;
  if (!spec.note.empty()) out += "# " + spec.note + "\n";
  out += "FROM " + spec.from + "\n";
  if (!spec.adapter.empty()) out += "ADAPTER " + spec.adapter + "\n";
  if (spec.chat_template) out += "TEMPLATE " + quoted("the chat template", spec.chat_template->go_template()) + "\n";
  if (!spec.system.empty()) out += "SYSTEM " + quoted("the system prompt", spec.system) + "\n";
  std::vector<std::string> seen;
  for (const std::string& stop : spec.stops) {
    const std::string s = trim(stop);
    if (s.empty() || std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    seen.push_back(s);
    // Ollama's parser cuts the quotes off as they are, with no escapes: a stop that holds a quote
    // goes between triple quotes (tests/scripts/ollama_modelfile_check.go reads them as Ollama does).
    out += "PARAMETER stop " + (s.find('"') == std::string::npos ? "\"" + s + "\"" : quoted("the stop string " + s, s)) +
           "\n";
  }
  return out;
}

}  // namespace ferry::io
