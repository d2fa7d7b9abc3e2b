// `ferry generate`: text from a model folder, one prompt or a jsonl of prompts.
//
//   ferry generate --model DIR --prompt "What is 2 + 3?" --chat --greedy
//   ferry generate --model DIR --prompts prompts.jsonl --output out.jsonl --temperature 0.7 --top-p 0.9
//
// The folder holds config.json, the safetensors weights and tokenizer.model. Prompt lines are
// {"messages": [...]} (always rendered with the chat template) or {"prompt": "text"} (wrapped in
// the template with --chat); with --continue-final-message a messages line ends with the start of
// the assistant's answer, which the model continues (transformers' continue_final_message).
// Generation stops at EOS, the template's stop strings and end-of-assistant marker, --stop strings
// (repeatable) and generation.stop_strings, or --max-new-tokens; printed text is cut before the stop string. --config/--set are optional: the
// `generation` section gives defaults that the flags override, e.g.
//   ferry generate --model DIR --prompt "List: a" --set 'generation.stop_strings=["\n\n", "END"]'
// Runs on the GPU (bf16) when one is visible, else on the CPU (fp32).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "cli/config_args.h"
#include "cli/inference_model.h"
#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/data/row_index.h"
#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"

namespace ferry::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompts_file;
  std::string output_file;
  bool chat = false;
  bool continue_final_message = false;  // messages lines end with an assistant message to continue
  std::string chat_template;  // empty: the folder's own template, else demo
  int64_t max_new_tokens = 128;
  bool greedy = false;
  bool no_cuda_graphs = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t seed = 0;
  int64_t batch_size = 8;
  std::vector<std::string> stop;
  ConfigArgs config;
};

// With --config or --set, the `generation` section supplies every setting whose flag was not given.
void apply_generation_config(const CLI::App& command, GenerateArgs& args) {
  if (args.config.path.empty() && args.config.overrides.empty()) return;
  const GenerationConfig g = resolve_config(args.config).generation;
  const auto unset = [&](const char* flag) { return command.get_option(flag)->count() == 0; };
  if (unset("--max-new-tokens")) args.max_new_tokens = g.max_new_tokens;
  if (unset("--greedy")) args.greedy = g.greedy;
  if (unset("--temperature")) args.temperature = g.temperature;
  if (unset("--top-k")) args.top_k = g.top_k;
  if (unset("--top-p")) args.top_p = g.top_p;
  args.stop.insert(args.stop.begin(), g.stop_strings.begin(), g.stop_strings.end());
}

// One prompt as read from the command line or a jsonl line, and its token ids.
struct PromptItem {
  nlohmann::ordered_json source;  // the jsonl object (echoed into the output) or {"prompt": text}
  std::vector<int64_t> ids;
};

// The chat template, resolved the first time a prompt is a conversation: raw text (--prompt
// without --chat, {"prompt": ...} lines) needs none, so a folder whose template cannot be used
// still generates from text.
class LazyChatTemplate {
 public:
  LazyChatTemplate(const std::string& flag_value, const Tokenizer& tokenizer)
      : flag_value_(flag_value), tokenizer_(tokenizer) {}
  const ChatTemplate& get() const {
    if (!resolved_) resolved_.emplace(resolve_command_line_chat_template(flag_value_, tokenizer_));
    return *resolved_;
  }
  // The template if a prompt needed one, else null.
  const ChatTemplate* if_resolved() const { return resolved_ ? &*resolved_ : nullptr; }

 private:
  std::string flag_value_;
  const Tokenizer& tokenizer_;
  mutable std::optional<ChatTemplate> resolved_;
};

std::vector<int64_t> encode_text_prompt(const std::string& text, const Tokenizer& tokenizer, bool chat,
                                        const LazyChatTemplate& chat_template) {
  if (chat) return chat_template.get().render_prompt({{ChatRole::user, text}}, tokenizer);
  std::vector<int64_t> ids;
  if (tokenizer.bos_id() >= 0) ids.push_back(tokenizer.bos_id());
  const std::vector<int64_t> body = tokenizer.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

// One line of --prompts: {"messages": [...], "tools": [...]?} or {"prompt": "text"}.
PromptItem prompt_item(const nlohmann::ordered_json& object, const GenerateArgs& args, const Tokenizer& tokenizer,
                       const LazyChatTemplate& chat_template) {
  PromptItem item{object, {}};
  if (object.contains("messages")) {
    const Conversation conversation = conversation_from_json(object, "messages");
    const bool open = args.continue_final_message;
    check_conversation(conversation, open ? ConversationEnd::continued : ConversationEnd::user);
    item.ids = chat_template.get().render_prompt(
        conversation, tokenizer, chat_context_from_json(object),
        open ? RenderEnd::continue_final_message : RenderEnd::generation_prompt);
  } else if (args.continue_final_message) {
    throw InputError("--continue-final-message continues the last (assistant) message of a {\"messages\": [...]} "
                     "line; this line has none");
  } else if (object.contains("prompt") && object["prompt"].is_string()) {
    item.ids = encode_text_prompt(object["prompt"].get<std::string>(), tokenizer, args.chat, chat_template);
  } else {
    throw InputError("expected {\"messages\": [...]} or {\"prompt\": \"text\"}");
  }
  if (item.ids.empty()) throw InputError("the prompt has no tokens");
  return item;
}

// The prompts: --prompt, or the lines of --prompts, every line checked up front but read again a
// batch at a time (a file of millions of prompts is never held whole).
class PromptSource {
 public:
  PromptSource(const GenerateArgs& args, const Tokenizer& tokenizer, const LazyChatTemplate& chat_template)
      : args_(args), tokenizer_(tokenizer), chat_template_(chat_template) {
    if (args.prompts_file.empty()) {
      single_ = {nlohmann::ordered_json{{"prompt", args.prompt}}, encode_text_prompt(args.prompt, tokenizer, args.chat, chat_template)};
      if (single_.ids.empty()) throw InputError("--prompt is empty");
      return;
    }
    index_ = RowIndex(DataFile::open(args.prompts_file), /*skip_bad_lines=*/false, [&](int64_t, const nlohmann::ordered_json& object) {
      (void)prompt_item(object, args, tokenizer, chat_template);
      return true;
    });
    if (index_.empty()) throw InputError(args.prompts_file + ": no prompts in the file");
  }

  size_t size() const { return args_.prompts_file.empty() ? 1 : index_.size(); }

  std::vector<PromptItem> batch(size_t begin, size_t end) const {
    if (args_.prompts_file.empty()) return {single_};
    std::vector<PromptItem> items;
    for (size_t i = begin; i < end; ++i) items.push_back(prompt_item(index_.read(i), args_, tokenizer_, chat_template_));
    return items;
  }

 private:
  const GenerateArgs& args_;
  const Tokenizer& tokenizer_;
  const LazyChatTemplate& chat_template_;
  RowIndex index_;
  PromptItem single_;
};

void run_generate(const GenerateArgs& args) {
  if (args.prompt.empty() && args.prompts_file.empty()) throw UserError("give --prompt TEXT or --prompts FILE.jsonl");
  if (args.batch_size < 1) throw UserError("--batch-size must be at least 1");
  if (!args.output_file.empty() && args.prompts_file.empty()) throw UserError("--output goes with --prompts");
  if (args.continue_final_message && args.prompts_file.empty()) {
    throw UserError("--continue-final-message goes with --prompts lines of {\"messages\": [...]} that end with the "
                    "start of the assistant's answer; --prompt is a user message, answered with --chat");
  }
  InferenceModel loaded = load_inference_model(args.model);
  CausalLM& model = loaded.model;
  const Tokenizer& tokenizer = loaded.tokenizer;
  const LazyChatTemplate chat_template(args.chat_template, tokenizer);
  const PromptSource source(args, tokenizer, chat_template);

  GenerateOptions options = loaded.generate_options(chat_template.if_resolved());
  options.max_new_tokens = args.max_new_tokens;
  options.sampling = {.greedy = args.greedy, .temperature = args.temperature, .top_k = args.top_k, .top_p = args.top_p};
  options.cuda_graphs = !args.no_cuda_graphs;
  options.max_rows = args.batch_size;
  options.stop_strings.insert(options.stop_strings.end(), args.stop.begin(), args.stop.end());
  const StopStrings stop_strings(options.stop_strings);
  std::vector<int64_t> stops = options.eos_token_ids;
  stops.insert(stops.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());

  std::optional<std::ofstream> file;
  if (!args.output_file.empty()) {
    file.emplace(args.output_file);
    if (!*file) throw UserError("cannot write " + args.output_file);
  }
  const int64_t pad_for_batch = options.pad_token_id >= 0 ? options.pad_token_id : 0;
  double generating = 0.0;  // seconds in generate(): prefill and decoding, not loading or writing
  std::vector<double> call_seconds;
  int64_t generated = 0;    // new tokens up to and including each row's stop
  // --batch-size rows decode at once; the other prompts of a call wait and join as rows stop.
  const size_t per_call = static_cast<size_t>(args.batch_size * kBatchesPerGenerateCall);
  for (size_t begin = 0; begin < source.size(); begin += per_call) {
    const size_t end = std::min(source.size(), begin + per_call);
    const std::vector<PromptItem> items = source.batch(begin, end);
    std::vector<std::vector<int64_t>> prompts;
    for (const PromptItem& item : items) prompts.push_back(item.ids);
    const PromptBatch batch = left_pad(prompts, pad_for_batch);
    // Each prompt samples from its own generator, seeded by --seed and its line: its completion
    // does not depend on --batch-size or on the prompts beside it.
    std::vector<at::Generator> row_generators;
    for (size_t i = begin; i < end && !options.sampling.greedy; ++i) {
      row_generators.push_back(row_sampling_generator(static_cast<uint64_t>(args.seed), static_cast<int64_t>(i)));
    }
    options.row_generators = options.sampling.greedy ? nullptr : &row_generators;
    const double started = monotonic_seconds();
    const GenerateResult result = generate(*model, batch.input_ids, batch.attention_mask, options);
    call_seconds.push_back(monotonic_seconds() - started);
    generating += call_seconds.back();
    generated += result.attention_mask.narrow(1, result.prompt_length, result.logprobs.size(1)).sum().item<int64_t>();
    for (size_t i = begin; i < end; ++i) {
      const Completion completion = completion_of(result, static_cast<int64_t>(i - begin), tokenizer, stops, stop_strings);
      if (args.prompts_file.empty()) {
        std::cout << completion.text << std::endl;
        continue;
      }
      nlohmann::ordered_json line = items[i - begin].source;
      line["completion"] = completion.text;
      line["completion_tokens"] = completion.ids.size();
      line["stopped"] = completion.stopped;
      // A generation may stop inside a multi-byte character: U+FFFD replaces the broken bytes.
      (file ? *file : std::cout) << line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    }
  }
  if (file) {
    file->close();
    if (!*file) throw UserError("writing " + args.output_file + " failed");
    std::cerr << "wrote " << source.size() << " completions to " << args.output_file << "\n";
  }
  if (!args.prompts_file.empty()) {
    std::cerr << "generated " << generated << " tokens in " << generating << " s ("
              << static_cast<double>(generated) / std::max(generating, 1e-9) << " tokens/s, prefill included";
    if (call_seconds.size() > 1) {  // the first call of a process also pays for its fresh memory
      std::cerr << "; per " << per_call << " prompts";
      for (size_t i = 0; i < call_seconds.size(); ++i) std::cerr << (i ? ", " : " ") << call_seconds[i];
      std::cerr << " s";
    }
    std::cerr << ")\n";
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* command = app.add_subcommand("generate", "Generate text with a model (KV cache, batched)");
  command->add_option("--model", args->model, "model: a Hugging Face folder, a .gguf file or ollama:NAME[:TAG]")->required();
  auto* prompt = command->add_option("--prompt", args->prompt, "one prompt");
  auto* prompts = command->add_option("--prompts", args->prompts_file, "jsonl of prompts ({\"messages\": [...]})");
  prompt->excludes(prompts);
  command->add_option("--output", args->output_file, "jsonl to write results to (with --prompts)");
  command->add_flag("--chat", args->chat, "wrap the prompt in the model's chat template");
  command->add_flag("--continue-final-message", args->continue_final_message,
                    "prompts' messages end with the start of the assistant's answer: the model continues it "
                    "(transformers' continue_final_message; no generation prompt is added)");
  command->add_option("--chat-template", args->chat_template,
                      kChatTemplateFlagHelp);
  command->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate at most");
  command->add_flag("--greedy", args->greedy, "greedy decoding");
  command->add_flag("--no-cuda-graphs", args->no_cuda_graphs,
                    "on a GPU, launch the decode step's kernels one by one instead of replaying CUDA graphs");
  command->add_option("--temperature", args->temperature, "sampling temperature");
  command->add_option("--top-p", args->top_p, "nucleus sampling mass");
  command->add_option("--top-k", args->top_k, "top-k sampling (0: off)");
  command->add_option("--seed", args->seed, "sampling seed");
  command->add_option("--batch-size", args->batch_size,
                      "prompts decoded at once (with --prompts); as one ends the next prompt takes its place");
  command->add_option("--stop", args->stop, "text that ends generation, cut from the output (repeatable)")
      ->allow_extra_args(false);
  add_config_options(command, args->config, /*optional=*/true);
  command->callback([args, command] {
    apply_generation_config(*command, *args);
    run_generate(*args);
  });
}

}  // namespace ferry::cli
