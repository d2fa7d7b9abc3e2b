// `ferry config show --config F [--set k=v ...]`: prints the resolved config (defaults included)
// as YAML; `ferry config keys` lists every key; `ferry config import` is command_config_import.cpp.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/config_args.h"
#include "core/config/config_io.h"

namespace ferry::cli {

void add_config_command(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Inspect configs");
  config->require_subcommand(1);

  auto args = std::make_shared<ConfigArgs>();
  auto* show = config->add_subcommand("show", "Print the resolved config as YAML (defaults included)");
  add_config_options(show, *args, /*optional=*/true);
  show->callback([args] { std::cout << config_to_yaml(resolve_config(*args)); });

  auto* keys = config->add_subcommand("keys", "List every config key");
  keys->callback([] {
    for (const auto& key : config_key_paths()) std::cout << key << "\n";
  });

  add_config_import_command(config);
}

}  // namespace ferry::cli
