// `ferry export`: a checkpoint to a Hugging Face folder (LoRA merged or as a PEFT adapter).
#include <CLI/CLI.hpp>

#include <memory>

#include "src/cli/commands.h"
#include "src/core/error.h"

namespace ferry::cli {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string output;
  std::string lora;
  int64_t max_shard_size_mb = 0;
};

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* command = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model folder");
  command->add_option("--checkpoint", args->checkpoint, "checkpoint folder (output.dir/step-N or final)")->required();
  command->add_option("--output", args->output, "folder to write")->required();
  command->add_option("--lora", args->lora, "merged (default) or adapter (PEFT format)")
      ->check(CLI::IsMember({"merged", "adapter"}));
  command->add_option("--max-shard-size-mb", args->max_shard_size_mb, "split weights into shards of this size (0: one file)");
  command->callback([] {
    throw NotImplementedError("`ferry export` is not implemented yet in this build; see the status table in README.md");
  });
}

}  // namespace ferry::cli
