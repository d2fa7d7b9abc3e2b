// An Ollama Modelfile for an exported GGUF model: FROM, ADAPTER, the chat template as Ollama's Go
// TEMPLATE, the stop PARAMETERs and the SYSTEM prompt.
//
// Ollama templates are Go templates; a model's chat template is Jinja (or one of Ferry's shipped
// templates). Rather than translate Jinja, the template is rendered on probe conversations whose
// contents are unique markers, and the text between the markers gives the pieces every turn is
// made of (system prefix and suffix, the block written when no system message is given, user
// prefix, the text after a user turn before an answer or before the generation prompt, the end of
// an answer). The Go template writes those pieces around Ollama's .System and .Messages. Before it
// is used, the pieces are put together again for several conversations and must reproduce the
// template's own renderings exactly; a template they cannot reproduce (role-dependent markup,
// dates, tool formats) gets no TEMPLATE line, and Ollama falls back to the GGUF's own
// tokenizer.chat_template, which it matches against the templates it knows.
// Tool calls and tool results are not written by the generated template.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ferry {
struct ChatTemplate;
}

namespace ferry::io {

// Where a template writes the system message.
enum class OllamaSystemLayout {
  block,       // a block of its own before the turns (ChatML, Llama 3, Phi-3)
  first_user,  // inside the first user turn, before its content (Gemma, Llama 2)
  none,        // nowhere: the template refuses system messages (Gemma 2)
};

struct OllamaTemplate {
  OllamaSystemLayout system_layout = OllamaSystemLayout::block;
  std::string system_prefix, system_suffix;  // around .System (first_user: inside the first user turn)
  std::string no_system;                     // what the template writes when there is no system message
  std::string user_prefix;
  std::string user_then_answer;      // after a user turn that an answer follows (its end, the answer's header)
  std::string user_then_generation;  // after the last user turn (its end, the generation prompt)
  std::string answer_end;            // after an answer that is not the last message

  // The Go template for Ollama's TEMPLATE.
  std::string go_template() const;
};

// The pieces of `chat_template` (see above), without the BOS text `bos_text` a rendering starts
// with (llama.cpp adds BOS itself). nullopt, with the reason in `why`, when the pieces do not
// reproduce the template's renderings.
std::optional<OllamaTemplate> infer_ollama_template(const ChatTemplate& chat_template, const std::string& bos_text,
                                                    std::string* why = nullptr);

// The stop parameters: what the template writes right after an answer, each one whole: a marker
// ("<|im_end|>", "<end_of_turn>", "</s>"; never cut inside one) or, for a plain-text format, the
// first line of what follows ("### User:"). Read off two renderings: [user, answer, user] (what
// follows an answer inside a conversation, up to the next user message) and the closed [user,
// answer] (what follows the final answer: what training teaches the model to write). When the
// closed rendering writes nothing after the answer, the model ends its answer with a token the
// template never shows, so `end_tokens` (the tokenizer's EOS and the end-of-turn ids the model
// folder names as eos_token_id, as text) are added. A template that refuses the probes gets the
// first marker of its end-of-turn text and `end_tokens`.
std::vector<std::string> infer_ollama_stops(const ChatTemplate& chat_template, const std::vector<std::string>& end_tokens);

// The pieces put together for a conversation as the Go template would (roles "system", "user",
// "assistant"; `generation`: the last message is a user turn to answer). For tests and the check.
std::string render_ollama_pieces(const OllamaTemplate& pieces,
                                 const std::vector<std::pair<std::string, std::string>>& messages);

struct ModelfileSpec {
  std::string from;                  // the GGUF model file, relative to the Modelfile's folder
  std::string adapter;               // a GGUF LoRA adapter file, or empty
  std::optional<OllamaTemplate> chat_template;
  std::vector<std::string> stops;    // PARAMETER stop lines (infer_ollama_stops)
  std::string system;                // SYSTEM, or empty
  std::string note;                  // a comment line saying what wrote it
};

// The Modelfile text. InputError when a string cannot be written between Ollama's """ quotes.
std::string modelfile_text(const ModelfileSpec& spec);

}  // namespace ferry::io
