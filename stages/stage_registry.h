// The table of training stages (sft, rm, dpo, kto, distill, ppo, grpo) that `ferry train-*` and `ferry pipeline`
// dispatch to. A stage is one function from a resolved Config to a finished run in output.dir; the
// shared loop (train) and the offload engine (offload/) do the rest. Adding a stage means
// writing stages/<name>.cpp and listing its function in stage_registry.cpp.
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"

namespace ferry {

struct StageInfo {
  Stage stage;
  const char* command;  // "train-sft"
  const char* title;    // "supervised fine-tuning"
  void (*run)(const Config&);  // nullptr: not built yet
  // Takes distributed.mode diloco (the shared Trainer's stages; the RL stages synchronise every step).
  bool diloco = false;
};

const std::vector<StageInfo>& all_stages();
const StageInfo& stage_info(Stage stage);

// Throws ConfigError when a file written for another stage is given to this one.
void check_stage_matches(const Config& config, Stage stage, const std::string& config_path);

// Saves the resolved config into output.dir and runs the stage.
void run_stage(Stage stage, const Config& config);

}  // namespace ferry
