// What an RL checkpoint (PPO, GRPO) holds besides the models, the optimizers and the trainer state
// (train/trainer_state.h): the optimizer steps taken and the evaluation before the first rollout,
// and PPO's KL coefficient, running reward statistics and SFT-mix cursor (GRPO leaves them at their
// defaults) — in step-N/ppo_state.json (the name checkpoints have always used; format name +
// version inside, so another file is rejected with a clear message).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>

#include "src/data/epoch_order.h"
#include "train/rl/running_moments.h"

namespace ferry::rl {

struct RlRunState {
  double kl_coef = 0;
  rl::RunningMoments moments;
  DataCursor ptx_cursor;
  int64_t optimizer_steps = 0;
  nlohmann::json first_eval;  // the evaluation before the first rollout (null: none)
};

void save_rl_run_state(const std::filesystem::path& dir, const RlRunState& state);
// Throws InputError naming the file when it is missing, malformed or of another format.
RlRunState load_rl_run_state(const std::filesystem::path& dir);

}  // namespace ferry::rl
