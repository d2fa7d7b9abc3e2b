// What a PPO checkpoint holds besides the models, the optimizers and the trainer state
// (src/train/trainer_state.h): the KL coefficient, the running reward statistics, the SFT-mix
// cursor, the optimizer steps taken and the evaluation before the first rollout — in
// step-N/ppo_state.json (format name + version, so another file is rejected with a clear message).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

#include "src/data/epoch_order.h"
#include "src/rl/running_moments.h"

namespace ferry {

struct PpoState {
  double kl_coef = 0;
  rl::RunningMoments moments;
  DataCursor ptx_cursor;
  int64_t optimizer_steps = 0;
  nlohmann::json first_eval;  // the evaluation before the first rollout (null: none)
};

void save_ppo_state(const std::filesystem::path& dir, const PpoState& state);
// Throws InputError naming the file when it is missing, malformed or of another format.
PpoState load_ppo_state(const std::filesystem::path& dir);

}  // namespace ferry
