// --config / --set handling shared by the commands.
#include "cli/config_args.h"

#include <CLI/CLI.hpp>

#include "core/config/config_io.h"

namespace ferry::cli {

void add_config_options(CLI::App* command, ConfigArgs& args, bool optional) {
  auto* config = command->add_option("-c,--config", args.path, "YAML or JSON config file");
  if (!optional) config->required();
  command->add_option("--set", args.overrides, "override a key: --set train.learning_rate=1e-4 (repeatable)")
      ->allow_extra_args(false)
      ->take_all();
}

Config resolve_config(const ConfigArgs& args) { return load_config(args.path, args.overrides); }

}  // namespace ferry::cli
