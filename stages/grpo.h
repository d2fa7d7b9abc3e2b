// GRPO (`ferry train-grpo`), as TRL's GRPOTrainer: no critic, and with grpo.beta 0 no reference
// model either — the RL a small GPU can afford. Under one parameter engine: the policy (model.path,
// trained), the reference (only when beta > 0: the policy with its LoRA adapters off, or a frozen
// copy of model.path) and the reward model (only when `rewards:` lists one).
//
// One rollout: grpo.generation_batch_size / grpo.num_generations prompts from data.prompt_file in
// seeded epoch order, each sampled num_generations times -> the experience maker (generation, then
// scoring: reference log-probs, the reward model; the policy's own log-probs only when
// num_iterations > 1) -> the rewards (`rewards:`, train/rl/rewards.h) -> advantages within each
// prompt's group (train/rl/group_advantages.h, scale_rewards) -> truncated completions masked when
// mask_truncated_completions -> the learner (grpo_learner.h). The run is train.max_steps rollouts,
// else grpo.num_episodes passes over the prompts.
//
// With data.eval_file, greedy answers are judged before the first rollout and after the last.
// Checkpoints (output.dir/step-N/): policy/, the optimizer state, trainer_state.json, the random
// generators and ppo_state.json (the RL stages' shared state file: optimizer steps, the first
// evaluation). final/ is the policy.
#pragma once

#include "core/config/config.h"

namespace ferry {

void run_grpo(const Config& config);

}  // namespace ferry
