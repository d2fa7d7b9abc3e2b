// `ferry config import`: reading the other tool's file, choosing the stage, running its table
// and checking that the result loads (see config_import.h).
#include "core/config/config_import.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config/config_import_shared.h"
#include "core/config/config_io.h"
#include "core/error.h"

namespace ferry {

ForeignTool foreign_tool_from_name(std::string_view name, const std::string& file) {
  if (name == "trl") return ForeignTool::trl;
  if (name == "axolotl") return ForeignTool::axolotl;
  if (name == "llamafactory" || name == "llama-factory" || name == "llama_factory") return ForeignTool::llamafactory;
  throw ConfigError(file + ": --from " + std::string(name) +
                    ": Ferry imports configs of trl, axolotl or llamafactory (LLaMA-Factory)");
}

std::string_view foreign_tool_name(ForeignTool tool) {
  switch (tool) {
    case ForeignTool::trl: return "TRL";
    case ForeignTool::axolotl: return "Axolotl";
    case ForeignTool::llamafactory: return "LLaMA-Factory";
  }
  return "?";
}

ImportedConfig import_foreign_config(ForeignTool tool, const std::string& text, const std::string& file, Stage stage) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(file + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) {
    throw ConfigError(file + ": expected a YAML mapping of " + std::string(foreign_tool_name(tool)) +
                      " keys (key: value lines), got " + (root.IsSequence() ? "a list" : root.IsNull() ? "nothing" : "a single value"));
  }
  const std::string tool_name(foreign_tool_name(tool));
  ForeignConfigMapper m(root, file, tool_name, tool == ForeignTool::axolotl ? std::set<std::string>{"trl"}
                                                                          : std::set<std::string>{});
  Stage stated = Stage::any;
  std::string stated_by;
  if (tool == ForeignTool::axolotl) {
    stated = config_import::axolotl_stage(m);
    stated_by = "its rl: / reward_model: keys";
  } else if (tool == ForeignTool::llamafactory) {
    stated = config_import::llamafactory_stage(m);
    stated_by = "its stage: key";
  }
  if (stage != Stage::any && stated != Stage::any && stage != stated) {
    throw ConfigError(file + ": --stage " + std::string(enum_name(stage)) + " disagrees with the file (" + stated_by +
                      " say " + std::string(enum_name(stated)) + "): drop --stage or make them agree");
  }
  if (stage == Stage::any) stage = stated;
  if (stage == Stage::any) {
    throw ConfigError(file + ": which stage is this " + tool_name + " config for? The file does not say: give --stage "
                      "sft, dpo, grpo, rm or kto" + (tool == ForeignTool::llamafactory ? " (or ppo)" : ""));
  }
  m.note("Imported from " + file + " (" + tool_name + ", stage " + std::string(enum_name(stage)) +
         ") by `ferry config import`; docs/from-trl.md says what each key means on both sides. Keys that could not "
         "be mapped were listed on stderr.");
  std::string (*reason)(const std::string&) = nullptr;
  switch (tool) {
    case ForeignTool::trl:
      config_import::map_trl(m, stage);
      reason = config_import::trl_reason;
      break;
    case ForeignTool::axolotl:
      config_import::map_axolotl(m, stage);
      reason = config_import::axolotl_reason;
      break;
    case ForeignTool::llamafactory:
      config_import::map_llamafactory(m, stage);
      reason = config_import::llamafactory_reason;
      break;
  }
  m.set("stage", std::string(enum_name(stage)));
  ImportedConfig imported = m.finish(stage, reason);
  try {
    validate_config(parse_config(imported.yaml, "the imported config"));  // as `ferry config show -c` loads it
  } catch (const ConfigError& e) {
    throw ConfigError(file + ": the Ferry config made from it does not load: " + e.what() +
                      " (fix the value in the file, or import and edit the result)");
  }
  return imported;
}

ImportedConfig import_foreign_config_file(ForeignTool tool, const std::string& path, Stage stage) {
  std::error_code ec;
  std::ifstream in(path);
  if (!std::filesystem::is_regular_file(path, ec) || !in) throw ConfigError(path + ": cannot read the " + std::string(foreign_tool_name(tool)) + " config (does it exist?)");
  std::stringstream text;
  text << in.rdbuf();
  return import_foreign_config(tool, text.str(), path, stage);
}

}  // namespace ferry
