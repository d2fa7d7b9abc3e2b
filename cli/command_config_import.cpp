// `ferry config import --from trl|axolotl|llamafactory FILE [--stage S] [--output OUT]`: another
// tool's YAML config as a Ferry config (core/config/config_import.h), written to OUT or stdout;
// the keys it could not map go to stderr, each with the reason.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/config/config_import.h"
#include "core/error.h"
#include "core/file_util.h"

namespace ferry::cli {
namespace {

struct ImportArgs {
  std::string from;
  std::string file;
  std::string stage;
  std::string output;
};

Stage stage_from_name(const std::string& name, const std::string& file) {
  Stage stage = Stage::any;
  if (name.empty()) return stage;
  if (!enum_parse(name, stage) || stage == Stage::any || stage == Stage::distill) {
    throw ConfigError(file + ": --stage " + name + ": expected sft, dpo, grpo, rm, kto or ppo");
  }
  return stage;
}

void run_import(const ImportArgs& args) {
  const ForeignTool tool = foreign_tool_from_name(args.from, args.file);
  const ImportedConfig imported = import_foreign_config_file(tool, args.file, stage_from_name(args.stage, args.file));
  if (args.output.empty()) {
    std::cout << imported.yaml << std::flush;
  } else {
    write_file_atomic(args.output, imported.yaml);
  }
  if (imported.unmapped.empty()) {
    std::cerr << "config import: every key of " << args.file << " was mapped\n";
    return;
  }
  std::cerr << "config import: " << imported.unmapped.size() << " key(s) of " << args.file << " not mapped:\n";
  for (const auto& u : imported.unmapped) std::cerr << "  " << u.key << ": " << u.reason << "\n";
}

}  // namespace

void add_config_import_command(CLI::App* config) {
  auto args = std::make_shared<ImportArgs>();
  auto* import = config->add_subcommand(
      "import", "Convert a TRL, Axolotl or LLaMA-Factory YAML config into a Ferry config (keys it cannot map: stderr)");
  import->add_option("--from", args->from, "the tool the file is for: trl, axolotl or llamafactory")->required();
  import->add_option("file", args->file, "the other tool's YAML config")->required();
  import->add_option("--stage", args->stage,
                     "sft, dpo, grpo, rm, kto (or ppo for LLaMA-Factory); needed unless the file says "
                     "(LLaMA-Factory's stage:, Axolotl's rl:)");
  import->add_option("--output,-o", args->output, "write the Ferry config here (default: stdout)");
  import->callback([args] { run_import(*args); });
}

}  // namespace ferry::cli
