// `ferry plan --config F [--gpu-memory 8GiB]`: the offload engine's memory plan for a run.
#include <CLI/CLI.hpp>

#include <memory>

#include "src/cli/commands.h"
#include "src/cli/config_args.h"
#include "src/core/error.h"

namespace ferry::cli {
namespace {

struct PlanArgs {
  ConfigArgs config;
  std::string gpu_memory;
};

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* command = app.add_subcommand("plan", "Explain where parameters, gradients and optimizer state will live");
  add_config_options(command, args->config);
  command->add_option("--gpu-memory", args->gpu_memory, "device memory budget, e.g. 8GiB (overrides offload.gpu_memory)");
  command->callback([args] {
    resolve_config(args->config);  // config errors first: they are the user's to fix today
    throw NotImplementedError("`ferry plan` is not implemented yet in this build; see the status table in README.md");
  });
}

}  // namespace ferry::cli
