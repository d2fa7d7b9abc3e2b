// A stage's result.json, written and read back (see stage_result.h).
#include "train/stage_result.h"

#include <nlohmann/json.hpp>

#include "core/config/config_io.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/fnv1a.h"
#include "src/dist/communicator.h"

namespace fs = std::filesystem;

namespace ferry {

void write_stage_result(const Config& config, const std::string& figures_json) {
  if (!dist::is_primary_process()) return;
  const nlohmann::json result{{"stage", std::string(enum_name(config.stage))},
                              {"config", config_to_yaml(config)},
                              {"inputs", stage_input_fingerprints(config)},
                              {"figures", nlohmann::json::parse(figures_json)}};
  write_file_atomic(fs::path(config.output.dir) / kStageResultFile, result.dump(2) + "\n");
}

nlohmann::json stage_input_fingerprints(const Config& config) {
  nlohmann::json inputs = nlohmann::json::object();
  for (const std::string* path : {&config.data.train_file, &config.data.eval_file, &config.data.prompt_file}) {
    if (path->empty() || inputs.contains(*path)) continue;
    try {
      inputs[*path] = file_fingerprint(*path);
    } catch (const InputError&) {
      inputs[*path] = "";
    }
  }
  return inputs;
}

// result.json's figures when the stage already finished with this very config and these very data
// files, else null; `why_not` says what differs when there was a finished run.
nlohmann::json finished_stage_result(const Config& config, std::string& why_not) {
  const std::filesystem::path dir(config.output.dir);
  const std::filesystem::path file = dir / kStageResultFile;
  if (!std::filesystem::exists(file) || !std::filesystem::exists(dir / "final")) return nullptr;
  try {
    const nlohmann::json result = nlohmann::json::parse(read_file(file));
    if (result.value("config", "") != config_to_yaml(config)) {
      why_not = "its config changed";
      return nullptr;
    }
    if (!result.contains("inputs")) {
      why_not = "its result.json predates data-file fingerprints";
      return nullptr;
    }
    const nlohmann::json& recorded = result.at("inputs");
    const nlohmann::json inputs = stage_input_fingerprints(config);
    for (const auto& [path, fingerprint] : inputs.items()) {
      if (recorded.value(path, std::string()) != fingerprint.get<std::string>()) {
        why_not = path + " changed since it ran";
        return nullptr;
      }
    }
    return result.at("figures");
  } catch (const std::exception&) {
    return nullptr;  // unreadable: run the stage again
  }
}

nlohmann::json read_stage_figures(const Config& config) {
  try {
    return nlohmann::json::parse(read_file(std::filesystem::path(config.output.dir) / kStageResultFile)).at("figures");
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace ferry
