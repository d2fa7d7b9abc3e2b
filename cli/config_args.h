// The `--config FILE` and repeatable `--set section.key=value` options shared by every command
// that reads a config, and their resolution into a checked Config.
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"

namespace CLI {
class App;
}

namespace ferry::cli {

struct ConfigArgs {
  std::string path;
  std::vector<std::string> overrides;
};

// Adds --config (required unless `optional`) and --set to `command`.
void add_config_options(CLI::App* command, ConfigArgs& args, bool optional = false);

Config resolve_config(const ConfigArgs& args);

}  // namespace ferry::cli
