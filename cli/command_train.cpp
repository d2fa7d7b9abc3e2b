// `ferry train-sft|train-rm|train-dpo|train-kto|train-distill|train-ppo|train-grpo --config F [--set k=v ...]`.
#include <CLI/CLI.hpp>

#include <memory>

#include "cli/commands.h"
#include "cli/config_args.h"
#include "stages/stage_registry.h"

namespace ferry::cli {

void add_train_commands(CLI::App& app) {
  for (const StageInfo& info : all_stages()) {
    auto args = std::make_shared<ConfigArgs>();
    auto* command = app.add_subcommand(info.command, std::string("Run ") + info.title);
    add_config_options(command, *args);
    const Stage stage = info.stage;
    command->callback([args, stage] {
      const Config config = resolve_config(*args);
      check_stage_matches(config, stage, args->path);
      run_stage(stage, config);
    });
  }
}

}  // namespace ferry::cli
