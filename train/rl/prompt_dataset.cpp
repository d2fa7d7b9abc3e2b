// Prompt files for rollouts (see prompt_dataset.h).
#include "train/rl/prompt_dataset.h"

#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry::rl {
namespace {

// The prompt's messages, or nullopt for a TRL text prompt.
std::optional<Conversation> prompt_conversation(const nlohmann::ordered_json& object) {
  if (object.contains("messages")) return conversation_from_json(object, "messages");
  if (object.contains("prompt")) {
    const nlohmann::ordered_json& prompt = object["prompt"];
    if (prompt.is_string()) return std::nullopt;
    if (prompt.is_array()) return conversation_from_json(object, "prompt");
    throw InputError("\"prompt\" must be text or a list of messages");
  }
  throw InputError("a prompt row needs \"messages\" (ColossalChat) or \"prompt\" (TRL); Alpaca (instruction) and "
                   "ShareGPT (conversations) rows work too, and data.columns maps other names (docs/data.md)");
}

std::string optional_string(const nlohmann::ordered_json& object, const char* key) {
  if (!object.contains(key)) return {};
  const nlohmann::ordered_json& value = object[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();  // "gt_answer": 42 means "42"
  throw InputError(std::string("\"") + key + "\" must be a string");
}

}  // namespace

PromptFile::PromptFile(std::string path, const Tokenizer& tokenizer, ChatTemplate chat_template,
                       const PromptFileOptions& options, std::ostream& log)
    : tokenizer_(&tokenizer), chat_template_(std::move(chat_template)) {
  if (path.empty()) throw ConfigError("data.prompt_file: no prompt file given; set data.prompt_file (jsonl of prompts)");
  int64_t too_long = 0, longest = 0;
  format_ = options.format;
  index_ = RowIndex(
      DataFile::open(path), options.skip_bad_lines,
      [&](int64_t line, const nlohmann::ordered_json& object) {
        const RolloutPrompt prompt = render_prompt(object, line);
        if (options.max_length > 0 && static_cast<int64_t>(prompt.ids.size()) >= options.max_length) {
          ++too_long;
          longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.ids.size()));
          return false;
        }
        with_answer_ += prompt.gt_answer.empty() ? 0 : 1;
        return true;
      },
      options.max_samples);
  const JsonlStats& stats = index_.stats();
  const std::string& file = index_.path();
  if (stats.skipped > 0) {
    log << file << ": skipped " << stats.skipped << " malformed lines (first: " << stats.first_skipped_error << ")\n";
  }
  if (too_long > 0) {
    log << file << ": skipped " << too_long << " prompts of " << options.max_length
        << "+ tokens (data.max_length leaves no room for an answer; the longest has " << longest << ")\n";
  }
  if (index_.empty()) {
    throw InputError(detail::concat(file, ": no usable prompt (", stats.lines, " lines read",
                                    too_long > 0 ? ", every prompt longer than data.max_length" : "",
                                    "); give a jsonl of {\"messages\": [...]} or {\"prompt\": \"...\"} lines"));
  }
}

RolloutPrompt PromptFile::render_prompt(const nlohmann::ordered_json& row, int64_t line) const {
  const nlohmann::ordered_json object = normalize_row(row, format_);
  std::optional<Conversation> messages = prompt_conversation(object);
  RolloutPrompt prompt;
  prompt.context = chat_context_from_json(object);
  Conversation conversation;
  if (messages) {
    conversation = std::move(*messages);
    check_conversation(conversation, ConversationEnd::user);
    prompt.ids = chat_template_.render_prompt(conversation, *tokenizer_, prompt.context);
    prompt.text = conversation.back().content;
  } else {
    prompt.conversational = false;
    prompt.text = object["prompt"].get<std::string>();
    prompt.ids = tokenizer_->encode_as_sequence(prompt.text);
    if (prompt.ids.empty()) throw InputError("\"prompt\" is empty");
  }
  prompt.source = row.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  prompt.gt_answer = optional_string(object, "gt_answer");
  prompt.kind = optional_string(object, "kind");
  prompt.line = line;
  prompt.conversation = std::move(conversation);
  return prompt;
}

LoadedPrompts PromptFile::load(const std::vector<int64_t>& indices) const {
  LoadedPrompts out;
  for (int64_t index : indices) {
    FERRY_CHECK(index >= 0 && static_cast<size_t>(index) < index_.size(), "prompt index out of range");
    if (out.count(index) > 0) continue;
    const size_t i = static_cast<size_t>(index);
    const nlohmann::ordered_json object = index_.read(i);
    try {
      out.emplace(index, render_prompt(object, index_.line(i)));
    } catch (const InputError& e) {  // it rendered when the file was indexed: the file changed
      throw InputError(detail::concat(index_.where(i), ": ", e.what()));
    }
  }
  return out;
}

std::vector<RolloutPrompt> PromptFile::load_all() const {
  std::vector<int64_t> indices(index_.size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  LoadedPrompts loaded = load(indices);
  std::vector<RolloutPrompt> out;
  out.reserve(loaded.size());
  for (auto& [index, prompt] : loaded) out.push_back(std::move(prompt));
  return out;
}

}  // namespace ferry::rl
