// Prompts for RL rollouts (PPO, GRPO) and for scoring answers: rows of any data file (data_file.h)
// of ColossalChat `{"messages": [system?, user], "gt_answer"?: "...", "kind"?: "..."}` or TRL
// prompt-only `{"prompt": ...}` (Alpaca and ShareGPT rows too, row_format.h). A message list is
// rendered with the chat template into token ids that end where the assistant's answer begins; a
// TRL text prompt is used as TRL's GRPO trainer uses it: tokenizer(text), no template.
//
// A PromptFile checks every line once when it opens (so a bad line stops the run before any
// training) but keeps only where each usable prompt starts (a RowIndex: 16 bytes per prompt,
// whatever the prompts hold); a rollout loads the few prompts it uses again, re-rendering them.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "src/data/row_format.h"
#include "src/data/row_index.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {
class Tokenizer;
}  // namespace ferry

namespace ferry::rl {

struct RolloutPrompt {
  std::vector<int64_t> ids;  // the rendered prompt
  Conversation conversation; // its messages (empty for a TRL text prompt), and what the template
                             // saw beside them (tools, ...):
  ChatContext context;       // an episode's turns are rendered after them
  std::string source;        // the row as JSON, every column (reward commands and an environment's
                             // `reset` get it)
  std::string text;          // what was asked: the last user message, or the text prompt
  std::string gt_answer;     // empty when the line has none
  std::string kind;          // the line's "kind" (task kind, for per-kind accuracy), may be empty
  int64_t line = 0;          // 1-based line (or row) in the file
  bool conversational = true; // false for a TRL text prompt
};

struct PromptFileOptions {
  int64_t max_length = 0;      // prompts longer than this are skipped and counted (0: no limit)
  bool skip_bad_lines = false;  // data.skip_bad_lines
  int64_t max_samples = 0;     // 0: all
  RowFormat format;            // data.format, data.columns, data.tags
};

// Loaded prompts by their index in a PromptFile.
using LoadedPrompts = std::map<int64_t, RolloutPrompt>;

class PromptFile {
 public:
  PromptFile() = default;  // no prompts
  // Reads and renders every line once. Throws InputError naming the file (and line) for a malformed
  // line (unless skipped), a file with no usable prompt, or when every prompt is too long; prints
  // how many lines were skipped and why to `log`. `tokenizer` must outlive the PromptFile.
  PromptFile(std::string path, const Tokenizer& tokenizer, ChatTemplate chat_template,
             const PromptFileOptions& options, std::ostream& log);

  size_t size() const { return index_.size(); }
  bool empty() const { return index_.empty(); }
  const std::string& path() const { return index_.path(); }
  int64_t with_answer() const { return with_answer_; }  // prompts that have a gt_answer

  // The prompts at `indices` (each index < size()), read again from the file. InputError when the
  // file changed (size or modification time) since it was opened.
  LoadedPrompts load(const std::vector<int64_t>& indices) const;
  // All of them (for small files: tests, evaluation sets).
  std::vector<RolloutPrompt> load_all() const;

 private:
  RolloutPrompt render_prompt(const nlohmann::ordered_json& object, int64_t line) const;

  const Tokenizer* tokenizer_ = nullptr;
  ChatTemplate chat_template_;
  RowFormat format_;
  RowIndex index_;  // the usable prompts' rows
  int64_t with_answer_ = 0;
};

}  // namespace ferry::rl
