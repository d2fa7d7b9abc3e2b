// Prompt files for rollouts (see prompt_dataset.h).
#include "src/rl/prompt_dataset.h"

#include <nlohmann/json.hpp>

#include "src/core/error.h"
#include "src/data/conversation_json.h"
#include "src/data/jsonl_reader.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry {
namespace {

Conversation prompt_conversation(const nlohmann::json& object) {
  if (object.contains("messages")) return conversation_from_json(object, "messages");
  if (object.contains("prompt")) {
    const nlohmann::json& prompt = object["prompt"];
    if (prompt.is_string()) return {ChatMessage{ChatRole::user, prompt.get<std::string>()}};
    if (prompt.is_array()) return conversation_from_json(object, "prompt");
    throw InputError("\"prompt\" must be a string or a list of messages");
  }
  throw InputError("a prompt line needs \"messages\" (ColossalChat) or \"prompt\" (TRL)");
}

std::string optional_string(const nlohmann::json& object, const char* key) {
  if (!object.contains(key)) return {};
  const nlohmann::json& value = object[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return value.dump();  // "gt_answer": 42 means "42"
  throw InputError(std::string("\"") + key + "\" must be a string");
}

}  // namespace

std::vector<RolloutPrompt> load_prompt_file(const std::string& path, const Tokenizer& tokenizer,
                                            const ChatTemplate& chat_template, const PromptFileOptions& options,
                                            std::ostream& log) {
  if (path.empty()) throw ConfigError("data.prompt_file: no prompt file given; set data.prompt_file (jsonl of prompts)");
  std::vector<RolloutPrompt> prompts;
  int64_t too_long = 0, longest = 0;
  const JsonlStats stats = read_jsonl(path, options.skip_bad_lines, [&](int64_t line, const nlohmann::json& object) {
    if (options.max_samples > 0 && static_cast<int64_t>(prompts.size()) >= options.max_samples) return;
    Conversation conversation = prompt_conversation(object);
    check_conversation(conversation, ConversationEnd::user);
    RolloutPrompt prompt;
    prompt.ids = chat_template.render_prompt(conversation, tokenizer);
    prompt.text = conversation.back().content;
    prompt.gt_answer = optional_string(object, "gt_answer");
    prompt.kind = optional_string(object, "kind");
    prompt.line = line;
    if (options.max_length > 0 && static_cast<int64_t>(prompt.ids.size()) >= options.max_length) {
      ++too_long;
      longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.ids.size()));
      return;
    }
    prompts.push_back(std::move(prompt));
  });
  if (stats.skipped > 0) {
    log << path << ": skipped " << stats.skipped << " malformed lines (first: " << stats.first_skipped_error << ")\n";
  }
  if (too_long > 0) {
    log << path << ": skipped " << too_long << " prompts of " << options.max_length
        << "+ tokens (data.max_length leaves no room for an answer; the longest has " << longest << ")\n";
  }
  if (prompts.empty()) {
    throw InputError(detail::concat(path, ": no usable prompt (", stats.lines, " lines read",
                                    too_long > 0 ? ", every prompt longer than data.max_length" : "",
                                    "); give a jsonl of {\"messages\": [...]} or {\"prompt\": \"...\"} lines"));
  }
  return prompts;
}

}  // namespace ferry
