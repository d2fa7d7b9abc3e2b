// `ferry score`: a reward model's score of each response in a jsonl file.
//
//   ferry score --model runs/demo/rm/final --data data/preference_eval.jsonl [--output scores.jsonl]
//
// Each line is either a preference pair ({"context"|"prompt", "chosen", "rejected"}, as train-rm
// reads them): both responses are scored and the pair counts as correct when chosen scores higher;
// or one response: {"messages": [..., assistant]} or {"prompt": ..., "response": ...}. The score is
// the model's value at the last token of prompt + response rendered with the chat template (as
// train-rm trains it). Prints the mean reward, the pairs' accuracy and, when lines carry a string
// "kind", the accuracy per kind; --output writes each line back with its reward(s).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "cli/accuracy_tally.h"
#include "cli/commands.h"
#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/data/jsonl_reader.h"
#include "src/data/preference_dataset.h"
#include "src/data/token_batch.h"
#include "src/io/model_path.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/model_setup.h"

namespace ferry::cli {
namespace {

struct ScoreArgs {
  std::string model;
  std::string data_file;
  std::string output_file;
  std::string chat_template;  // empty: the folder's own template, else demo
  int64_t max_length = 512;
  int64_t batch_size = 32;
  int64_t limit = 0;
};

// One line: one response, or a pair (chosen then rejected).
struct ScoreItem {
  nlohmann::ordered_json source;
  std::vector<TokenizedSample> responses;
  std::vector<double> rewards;
  bool pair = false;
};

TokenizedSample tokenize(const Conversation& prompt, const Conversation& response, const ChatContext& context,
                         const Tokenizer& tokenizer, const ChatTemplate& chat_template, int64_t max_length) {
  if (empty_response(response)) throw InputError("the response is empty");
  auto sample = tokenize_response(prompt, response, context, tokenizer, chat_template, max_length);
  if (!sample) {
    throw InputError("the prompt alone fills --max-length " + std::to_string(max_length) + " tokens; raise --max-length");
  }
  return std::move(*sample);
}

ScoreItem read_item(const nlohmann::ordered_json& object, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                    int64_t max_length) {
  ScoreItem item{object, {}, {}, false};
  const ChatContext context = chat_context_from_json(object);  // the line's tools and documents
  if (object.contains("chosen") || object.contains("rejected")) {
    const PreferenceMessages m = preference_messages_from_json(object);
    item.pair = true;
    if (m.chosen_empty() || m.rejected_empty()) throw InputError("the response is empty");
    PairSamples samples = tokenize_pair(m, tokenizer, chat_template, max_length);  // TRL rows as TRL tokenises them
    if (!samples.chosen || !samples.rejected) {
      throw InputError("the prompt alone fills --max-length " + std::to_string(max_length) + " tokens; raise --max-length");
    }
    item.responses.push_back(std::move(*samples.chosen));
    item.responses.push_back(std::move(*samples.rejected));
  } else if (object.contains("messages")) {
    Conversation conversation = conversation_from_json(object, "messages");
    check_conversation(conversation, ConversationEnd::assistant);
    const Conversation response{conversation.back()};
    conversation.pop_back();
    item.responses.push_back(tokenize(conversation, response, context, tokenizer, chat_template, max_length));
  } else if (object.contains("prompt") && object.contains("response")) {
    item.responses.push_back(tokenize(messages_or_text(object, "prompt", ChatRole::user),
                                      messages_or_text(object, "response", ChatRole::assistant), context, tokenizer,
                                      chat_template, max_length));
  } else {
    throw InputError("expected a preference pair ({\"context\"|\"prompt\", \"chosen\", \"rejected\"}), "
                     "{\"messages\": [..., assistant]} or {\"prompt\", \"response\"}");
  }
  return item;
}

void run_score(const ScoreArgs& args) {
  if (args.batch_size < 1) throw UserError("--batch-size must be at least 1");
  if (args.max_length < 2) throw UserError("--max-length must be at least 2");
  const bool cuda = torch::cuda::is_available();
  const c10::Device device = cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  const std::string folder = io::resolve_model_path(args.model).string();
  ScoreModel model = score_model_from_pretrained(folder, cuda ? at::kBFloat16 : at::kFloat, device);
  const Tokenizer tokenizer(folder);
  const ChatTemplate chat_template = resolve_command_line_chat_template(args.chat_template, tokenizer);
  const int64_t pad = stage_pad_id(model->config(), tokenizer);

  std::vector<ScoreItem> items;
  read_jsonl(args.data_file, /*skip_bad_lines=*/false, [&](int64_t, const nlohmann::ordered_json& object) {
    if (args.limit > 0 && static_cast<int64_t>(items.size()) >= args.limit) return;
    items.push_back(read_item(object, tokenizer, chat_template, args.max_length));
  });
  if (items.empty()) throw InputError(args.data_file + ": no lines to score");

  // Every response, in order, scored in batches.
  std::vector<std::pair<size_t, size_t>> order;  // (item, response)
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t r = 0; r < items[i].responses.size(); ++r) order.emplace_back(i, r);
  }
  torch::NoGradGuard no_grad;
  for (size_t begin = 0; begin < order.size(); begin += static_cast<size_t>(args.batch_size)) {
    const size_t end = std::min(order.size(), begin + static_cast<size_t>(args.batch_size));
    std::vector<const TokenizedSample*> samples;
    for (size_t k = begin; k < end; ++k) samples.push_back(&items[order[k].first].responses[order[k].second]);
    const TokenBatch batch = collate_padded(samples, pad);
    const torch::Tensor mask = batch.attention_mask.to(device);
    const torch::Tensor values = model->forward(batch.input_ids.to(device), mask, batch.position_ids.to(device));
    const torch::Tensor rewards = last_token_values(values, mask).to(torch::kCPU, torch::kDouble);  // (B)
    for (size_t k = begin; k < end; ++k) items[order[k].first].rewards.push_back(rewards[static_cast<int64_t>(k - begin)].item<double>());
  }

  double reward_sum = 0.0;
  int64_t responses = 0;
  AccuracyTally pairs;
  for (const ScoreItem& item : items) {
    for (double r : item.rewards) reward_sum += r;
    responses += static_cast<int64_t>(item.rewards.size());
    if (item.pair) pairs.add(item.source, item.rewards[0] > item.rewards[1]);
  }
  if (!args.output_file.empty()) {
    std::ofstream out(args.output_file);
    for (const ScoreItem& item : items) {
      nlohmann::ordered_json line = item.source;
      if (item.pair) {
        line["reward_chosen"] = item.rewards[0];
        line["reward_rejected"] = item.rewards[1];
        line["correct"] = item.rewards[0] > item.rewards[1];
      } else {
        line["reward"] = item.rewards[0];
      }
      out << line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    }
    out.close();
    if (!out) throw UserError("cannot write " + args.output_file);
  }
  std::cout << "scored " << responses << " responses: mean reward " << reward_sum / static_cast<double>(responses) << "\n";
  if (pairs.total() > 0) pairs.print(std::cout, "preference accuracy (chosen scored above rejected)");
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  auto* command = app.add_subcommand("score", "A reward model's score of each response (and accuracy on pairs)");
  command->add_option("--model", args->model, "reward model folder (train-rm's final/, or any *ForSequenceClassification)")
      ->required();
  command->add_option("--data", args->data_file, "jsonl of preference pairs, {\"messages\"} or {\"prompt\", \"response\"}")
      ->required();
  command->add_option("--output", args->output_file, "jsonl to write every line back with its reward(s)");
  command->add_option("--chat-template", args->chat_template,
                      kChatTemplateFlagHelp);
  command->add_option("--max-length", args->max_length, "tokens per prompt + response at most (longer responses are cut)");
  command->add_option("--batch-size", args->batch_size, "responses scored together");
  command->add_option("--limit", args->limit, "score only the first N lines (0: all)");
  command->callback([args] { run_score(*args); });
}

}  // namespace ferry::cli
