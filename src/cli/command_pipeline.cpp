// `ferry pipeline --config F`: runs the stage configs listed in `pipeline.stages` in order
// (the demo: SFT -> RM -> PPO). Every stage config is read and checked before the first one runs,
// so a typo in the last stage fails in seconds, not after hours of SFT.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "src/cli/commands.h"
#include "src/cli/config_args.h"
#include "src/config/config_io.h"
#include "src/core/error.h"
#include "stages/stage_registry.h"

namespace ferry::cli {
namespace {

struct PlannedStage {
  std::string path;
  Config config;
};

void run_pipeline(const ConfigArgs& args) {
  const Config pipeline = resolve_config(args);
  if (pipeline.pipeline.stages.empty()) {
    throw ConfigError(args.path + ": pipeline.stages is empty; list the stage config files to run, e.g.\n"
                      "  pipeline:\n    stages: [configs/demo-sft.yaml, configs/demo-rm.yaml, configs/demo-ppo.yaml]");
  }
  // --set overrides apply to every stage (e.g. --set train.device=cpu).
  std::vector<PlannedStage> planned;
  for (const auto& path : pipeline.pipeline.stages) {
    Config config = load_config(path, args.overrides);
    if (config.stage == Stage::any) {
      throw ConfigError(path + ": a pipeline stage config must say which stage it is (stage: sft|rm|dpo|ppo|grpo)");
    }
    planned.push_back({path, std::move(config)});
  }
  std::cout << "pipeline " << args.path << ": " << planned.size() << " stages\n";
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& info = stage_info(planned[i].config.stage);
    std::cout << "  " << i + 1 << ". " << info.command << "  " << planned[i].path << "  -> "
              << planned[i].config.output.dir << (info.run ? "" : "   [not implemented yet]") << "\n";
  }
  for (size_t i = 0; i < planned.size(); ++i) {
    const auto& info = stage_info(planned[i].config.stage);
    std::cout << "\n== stage " << i + 1 << "/" << planned.size() << ": " << info.title << " (" << planned[i].path
              << ")\n" << std::flush;
    run_stage(planned[i].config.stage, planned[i].config);
  }
  std::cout << "\npipeline finished\n";
}

}  // namespace

void add_pipeline_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  auto* command = app.add_subcommand("pipeline", "Run several stages in order (SFT -> RM -> PPO), from one config");
  add_config_options(command, *args);
  command->callback([args] { run_pipeline(*args); });
}

}  // namespace ferry::cli
