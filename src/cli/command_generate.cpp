// `ferry generate`: text from a model folder, one prompt or a jsonl of prompts.
#include <CLI/CLI.hpp>

#include <memory>

#include "src/cli/commands.h"
#include "src/core/error.h"

namespace ferry::cli {
namespace {

struct GenerateArgs {
  std::string model;
  std::string prompt;
  std::string prompts_file;
  std::string output_file;
  bool chat = false;
  int64_t max_new_tokens = 128;
  bool greedy = false;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  int64_t seed = 0;
};

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* command = app.add_subcommand("generate", "Generate text with a model (KV cache, batched)");
  command->add_option("--model", args->model, "model folder (Hugging Face layout)")->required();
  auto* prompt = command->add_option("--prompt", args->prompt, "one prompt");
  auto* prompts = command->add_option("--prompts", args->prompts_file, "jsonl of prompts ({\"messages\": [...]})");
  prompt->excludes(prompts);
  command->add_option("--output", args->output_file, "jsonl to write results to (with --prompts)");
  command->add_flag("--chat", args->chat, "wrap the prompt in the model's chat template");
  command->add_option("--max-new-tokens", args->max_new_tokens, "tokens to generate at most");
  command->add_flag("--greedy", args->greedy, "greedy decoding");
  command->add_option("--temperature", args->temperature, "sampling temperature");
  command->add_option("--top-p", args->top_p, "nucleus sampling mass");
  command->add_option("--top-k", args->top_k, "top-k sampling (0: off)");
  command->add_option("--seed", args->seed, "sampling seed");
  command->callback([] {
    throw NotImplementedError("`ferry generate` is not implemented yet in this build; see the status table in README.md");
  });
}

}  // namespace ferry::cli
