// The table `ferry pipeline` ends with: one line per stage with what it measured (SFT eval loss,
// reward-model held-out pair accuracy, DPO reward accuracy, PPO's rollouts), then the held-out
// prompts side by side before and after RL (mean reward and exact match of the starting model and
// of the trained policy), read from each stage's output.dir/result.json (train/stage_result.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ferry::cli {

struct StageOutcome {
  std::string command;     // "train-sft"
  std::string output_dir;
  nlohmann::json figures;  // result.json's "figures" (null when missing)
  bool reused = false;
  std::string eval_file;   // the stage's data.eval_file (PPO: its held-out prompts)
};

void print_pipeline_summary(std::ostream& out, const std::vector<StageOutcome>& stages);

}  // namespace ferry::cli
