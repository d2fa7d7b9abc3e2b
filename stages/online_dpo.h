// Online DPO (`ferry train-dpo` with dpo.online: true), as TRL 1.16's experimental
// OnlineDPOTrainer: no fixed pairs — each step samples two answers to each of its prompts
// (data.prompt_file) from the current policy, scores them with `rewards:` (a verifier, a reward
// model, a command, or a weighted mix; dpo.missing_eos_penalty off an answer that never ended),
// takes the better as chosen (the first on a tie) and learns from the pair with dpo.loss_type's
// loss (train/rl/online_dpo_learner.h). The reference is the policy with its LoRA adapters off or a
// frozen copy of dpo.reference_model (default model.path): its log-probs are those of answers
// sampled now, so they cannot be precomputed.
//
// One rollout = train.micro_batch_size x train.grad_accumulation prompts (x the processes), two
// answers each, one optimizer step. The run is train.max_steps rollouts, else train.epochs passes
// over the prompts. With data.eval_file, greedy answers are judged before the first rollout and after
// the last. Checkpoints and final/ as train-grpo's.
#pragma once

#include "core/config/config.h"

namespace ferry {

void run_online_dpo(const Config& config);

}  // namespace ferry
