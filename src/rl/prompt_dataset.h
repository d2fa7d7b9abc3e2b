// Prompts for RL rollouts (PPO, GRPO) and for scoring answers: a jsonl file of ColossalChat
// `{"messages": [system?, user], "gt_answer"?: "...", "kind"?: "..."}` or TRL `{"prompt": "..."}`
// (text, or a message list) lines, rendered with the chat template into token ids that end where
// the assistant's answer begins.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ferry {

class Tokenizer;
struct ChatTemplate;

struct RolloutPrompt {
  std::vector<int64_t> ids;  // the rendered prompt
  std::string text;          // what was asked: the last user message (given to reward commands)
  std::string gt_answer;     // empty when the line has none
  std::string kind;          // the line's "kind" (task kind, for per-kind accuracy), may be empty
  int64_t line = 0;          // 1-based line in the file
};

struct PromptFileOptions {
  int64_t max_length = 0;      // prompts longer than this are skipped and counted (0: no limit)
  bool skip_bad_lines = false;  // data.skip_bad_lines
  int64_t max_samples = 0;     // 0: all
};

// Reads and renders every prompt. Throws InputError naming the file (and line) for a malformed
// line (unless skipped), a file with no usable prompt, or when every prompt is too long; prints
// how many lines were skipped and why to `log`.
std::vector<RolloutPrompt> load_prompt_file(const std::string& path, const Tokenizer& tokenizer,
                                            const ChatTemplate& chat_template, const PromptFileOptions& options,
                                            std::ostream& log);

}  // namespace ferry
