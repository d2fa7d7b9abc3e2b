// `ferry eval`: exact-match accuracy of greedy answers on a prompt file with `gt_answer`.
//
//   ferry eval --model runs/demo/sft/final --prompts data/prompts_eval.jsonl
//
// Each line is {"messages": [system?, user], "gt_answer": "..."}; the prompt is rendered with the
// chat template, the model answers greedily until the end-of-assistant marker (or EOS, or
// --max-new-tokens), and the answer counts when, stripped of surrounding whitespace and of the
// end-of-assistant marker, it equals gt_answer exactly (data/README.md). Prints the accuracy (and
// per task kind when lines carry a string "kind", as the demo data does);
// --output writes every answer as jsonl.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/accuracy_tally.h"
#include "cli/commands.h"
#include "cli/inference_model.h"
#include "core/error.h"
#include "core/text.h"
#include "src/data/conversation_json.h"
#include "src/data/row_index.h"
#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/answer_match.h"

namespace ferry::cli {
namespace {

struct EvalArgs {
  std::string model;
  std::string prompts_file = "data/prompts_eval.jsonl";
  std::string output_file;
  std::string chat_template;  // empty: the folder's own template, else demo
  int64_t max_new_tokens = 32;
  int64_t batch_size = 32;
  int64_t limit = 0;
};

struct EvalItem {
  nlohmann::ordered_json source;
  std::vector<int64_t> ids;
};

// One line of --prompts: a {"messages": [...], "gt_answer": "..."} object.
EvalItem eval_item(const nlohmann::ordered_json& object, const Tokenizer& tokenizer, const ChatTemplate& chat_template) {
  if (!object.contains("gt_answer") || !object["gt_answer"].is_string()) {
    throw InputError("needs a string \"gt_answer\" to score against");
  }
  const Conversation conversation = conversation_from_json(object, "messages");
  check_conversation(conversation, ConversationEnd::user);
  return {object, chat_template.render_prompt(conversation, tokenizer, chat_context_from_json(object))};
}

void run_eval(const EvalArgs& args) {
  if (args.batch_size < 1) throw UserError("--batch-size must be at least 1");
  InferenceModel loaded = load_inference_model(args.model);
  CausalLM& model = loaded.model;
  const Tokenizer& tokenizer = loaded.tokenizer;
  const ChatTemplate chat_template = resolve_command_line_chat_template(args.chat_template, tokenizer);

  // Every line is checked up front, then read again a batch at a time: a file of millions of
  // prompts is never held whole.
  const RowIndex index(
      DataFile::open(args.prompts_file), /*skip_bad_lines=*/false,
      [&](int64_t, const nlohmann::ordered_json& object) {
        (void)eval_item(object, tokenizer, chat_template);
        return true;
      },
      args.limit);
  if (index.empty()) throw InputError(args.prompts_file + ": no prompts in the file");

  GenerateOptions options = loaded.generate_options(&chat_template);
  options.max_new_tokens = args.max_new_tokens;
  options.sampling.greedy = true;
  options.max_rows = args.batch_size;  // the rest of a call's prompts wait and join as rows stop
  std::vector<int64_t> stops = options.eos_token_ids;
  stops.insert(stops.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  const StopStrings stop_strings(options.stop_strings);
  const int64_t pad = options.pad_token_id >= 0 ? options.pad_token_id : 0;

  std::optional<std::ofstream> output;
  if (!args.output_file.empty()) {
    output.emplace(args.output_file);
    if (!*output) throw UserError("cannot write " + args.output_file);
  }
  AccuracyTally tally;
  const size_t per_call = static_cast<size_t>(args.batch_size * kBatchesPerGenerateCall);
  for (size_t begin = 0; begin < index.size(); begin += per_call) {
    const size_t end = std::min(index.size(), begin + per_call);
    std::vector<EvalItem> items;
    std::vector<std::vector<int64_t>> prompts;
    for (size_t i = begin; i < end; ++i) {
      items.push_back(eval_item(index.read(i), tokenizer, chat_template));
      prompts.push_back(items.back().ids);
    }
    const PromptBatch batch = left_pad(prompts, pad);
    const GenerateResult result = generate(*model, batch.input_ids, batch.attention_mask, options);
    for (size_t row = 0; row < items.size(); ++row) {
      const Completion completion = completion_of(result, static_cast<int64_t>(row), tokenizer, stops, stop_strings);
      const std::string answer = rl::normalise_answer(completion.text, chat_template.assistant_suffix);
      const bool correct = answer == items[row].source["gt_answer"].get<std::string>();
      tally.add(items[row].source, correct);
      if (output) {
        nlohmann::ordered_json line = items[row].source;
        line["answer"] = answer;
        line["correct"] = correct;
        // A generation may stop inside a multi-byte character: U+FFFD replaces the broken bytes.
        *output << line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
      }
    }
  }
  if (output) {
    output->close();
    if (!*output) throw UserError("writing " + args.output_file + " failed");
  }
  tally.print(std::cout, "exact match");
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* command = app.add_subcommand("eval", "Exact-match accuracy of greedy answers against gt_answer");
  command->add_option("--model", args->model, "model: a Hugging Face folder, a .gguf file or ollama:NAME[:TAG]")->required();
  command->add_option("--prompts", args->prompts_file, "jsonl of {\"messages\": [...], \"gt_answer\": ...}");
  command->add_option("--output", args->output_file, "jsonl to write every answer and whether it was correct");
  command->add_option("--chat-template", args->chat_template,
                      kChatTemplateFlagHelp);
  command->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate at most per answer");
  command->add_option("--batch-size", args->batch_size, "prompts decoded at once; as one ends the next takes its place");
  command->add_option("--limit", args->limit, "score only the first N prompts (0: all)");
  command->callback([args] { run_eval(*args); });
}

}  // namespace ferry::cli
