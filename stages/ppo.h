// PPO from a reward model (`ferry train-ppo`), as in InstructGPT / ColossalChat / TRL's PPOTrainer.
// Four models under one parameter engine: the policy (model.path, trained), the critic
// (ppo.critic_model or the reward model; its score head is the value head; trained), the reference
// (the policy with its LoRA adapters off, or a frozen copy of model.path; absent when the KL
// penalty is off) and the reward model (ppo.reward_model, frozen).
//
// One rollout (= one episode in the logs): ppo.rollout_batch_size prompts from data.prompt_file in
// seeded epoch order -> the experience maker (train/rl/experience.h: generation, then scoring) ->
// scores shaped (missing_eos_penalty, normalize_reward, reward_clip) -> per-token rewards (-kl_coef x
// KL estimate, plus the score on the last response token) -> GAE and whitening -> the learner
// (ppo_learner.h). The KL coefficient adapts when ppo.kl_target > 0. The run is train.max_steps
// rollouts, else ppo.num_episodes passes over the prompts.
//
// With data.eval_file (prompts with gt_answer), the policy's greedy answers are judged before the
// first rollout and after the last: exact match and mean reward, printed and in result.json.
//
// Checkpoints (output.dir/step-N/, N rollouts): policy/ and critic/ (Hugging Face folders), both
// optimizers' state, trainer_state.json (rollouts, prompt cursor), the random generators and
// ppo_state.json (KL coefficient, running reward statistics, ptx cursor, the first evaluation): a
// resumed run makes the same next rollout. final/ is the policy; final_critic/ the critic.
#pragma once

#include "core/config/config.h"

namespace ferry {

void run_ppo(const Config& config);

}  // namespace ferry
