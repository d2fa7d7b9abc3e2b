// The experience maker PPO and GRPO share: prompts in, scored responses out, in host memory.
//
//   generation phase  engine.make_resident({policy}); KV-cache sampling (src/generate) of every
//                     prompt's response, stopping at EOS, the template's stop ids and strings, or
//                     generation.max_new_tokens
//   scoring phase     engine.make_resident({}) (each model paged by group as the policy says);
//                     without gradients, micro-batch by micro-batch through the BackboneRunner:
//                     the policy's log-probs of the sampled tokens from a training-mode forward (what
//                     PPO's ratio is taken against, not the sampler's), the reference's (the policy
//                     with its LoRA adapters off, or a frozen model; none when absent), the critic's
//                     values, and the reward model's score at each response's last counted token
//
// Layout: `sequences` holds the left-padded prompt (P columns) then the response (R columns, pad
// after its last token); response position t is sequence column P + t, scored by the logits and
// values at column P - 1 + t. `response_mask` is 1 on response tokens up to and including the one
// that ended it (EOS, stop id, or the token completing a stop string), so padding never counts.
// A multi-turn episode (episode_runner.h) fills the response columns with its turns and the
// environment's replies between them: `attention_mask` is 1 on all of them (context), while
// `response_mask` is 1 only on the policy's own tokens (the loss); the reward model scores the
// last of those.
// A row whose score, values or log-probs are not finite is dropped and counted, never learned from.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "offload/engine_fwd.h"
#include "src/generate/generate.h"
#include "train/rl/episode_tally.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
class BackboneRunner;
class CausalLMImpl;
class ScoreModelImpl;
class Tokenizer;
}  // namespace ferry

namespace ferry::rl {

// One rollout, every tensor on the CPU.
struct Experience {
  torch::Tensor sequences;       // (B, P + R) int64
  torch::Tensor attention_mask;  // (B, P + R) int64: 1 at prompt and counted response tokens
  int64_t prompt_length = 0;     // P
  torch::Tensor response_mask;   // (B, R) fp32
  torch::Tensor logprobs;        // (B, R) fp32, 0 outside the mask
  torch::Tensor ref_logprobs;    // (B, R) fp32; undefined without a reference
  torch::Tensor values;          // (B, R) fp32; undefined without a critic
  torch::Tensor raw_scores;      // (B) fp32 reward model score; undefined without a reward model
  torch::Tensor env_rewards;     // (B) fp32 the environment's reward of each episode (NaN: the episode
                                 // faulted); undefined without rollout.environment
  torch::Tensor scores;          // (B) fp32 the score learned from (the caller shapes raw_scores)
  torch::Tensor ended;           // (B) bool: ended by EOS / a stop id / a stop string, not by the budget
  torch::Tensor advantages;      // (B, R) fp32, set by the advantage estimator
  torch::Tensor returns;         // (B, R) fp32, set with GAE (the critic's targets)
  std::vector<int64_t> prompt_index;   // row -> index into the prompt list
  std::vector<std::string> responses;  // row -> decoded response (cut before a stop string)

  int64_t rows() const { return sequences.defined() ? sequences.size(0) : 0; }
  int64_t response_length() const { return response_mask.size(1); }
  // The rows `index` (int64 CPU tensor) of every tensor, as a new Experience.
  Experience select(const torch::Tensor& index) const;
};

// The models a rollout runs, by their names in the engine. Pointers may be null where a model is
// absent; `reference_is_policy_without_lora` makes the policy with its adapters off the reference.
struct RolloutModels {
  std::string policy_name = "policy";
  CausalLMImpl* policy = nullptr;
  std::string reference_name = "reference";
  CausalLMImpl* reference = nullptr;
  bool reference_is_policy_without_lora = false;
  std::string critic_name = "critic";
  ScoreModelImpl* critic = nullptr;
  std::string reward_name = "reward";
  ScoreModelImpl* reward = nullptr;

};

struct ExperienceOptions {
  GenerateOptions generate;   // sampling, stop ids and strings, pad id, max_new_tokens
  int64_t micro_batch_size = 8;  // rows per scoring forward
  int64_t logits_chunk = 0;      // train.logits_chunk: LM-head rows at a time when scoring
  int64_t pad_id = 0;
  bool policy_logprobs = true;  // false: the scoring phase skips the policy (held-out evaluation)
  bool share_prompts = true;    // train.share_prompts: rows of one prompt share its scoring forward
  // > 0: the temperature the scoring phase's log-probs are taken at (online DPO: 1, as TRL's);
  // 0: the sampling temperature (PPO's and GRPO's ratios and KL, as TRL's).
  double scoring_temperature = 0;
};

// Wall time and tokens of each phase, for the metrics.
struct ExperienceTimings {
  double generate_seconds = 0, score_seconds = 0;
  int64_t generated_tokens = 0;  // response tokens that count
  int64_t scored_tokens = 0;     // prompt + response tokens through each scoring model
  int64_t dropped_rows = 0;      // rows with a non-finite score, value or log-prob
  // The engine's peak device bytes in each phase (its accountant's peaks restart at each phase).
  uint64_t generate_peak_bytes = 0, score_peak_bytes = 0;
  EpisodeTally episodes;  // multi-turn rollouts (rollout.environment); empty otherwise
};

class EpisodeRunner;

class ExperienceMaker {
 public:
  ExperienceMaker(offload::ParameterEngine& engine, RolloutModels models, ExperienceOptions options, const Tokenizer& tokenizer);

  // Generates and scores one response per prompt; row i's samples are drawn from
  // row_generators[i] (one per prompt; empty for greedy decoding).
  Experience make(const std::vector<const RolloutPrompt*>& prompts, const std::vector<int64_t>& prompt_index,
                  std::vector<at::Generator>& row_generators, ExperienceTimings* timings = nullptr);

  // The scoring phase alone, on given sequences (tests compare it with per-sequence runs).
  void score(Experience& experience, ExperienceTimings* timings = nullptr);

  // Multi-turn rollouts: each prompt becomes an episode `runner` runs against its environment
  // (null: one completion per prompt). The runner must outlive this maker's use of it.
  void set_episodes(EpisodeRunner* runner) { episodes_ = runner; }

 private:
  // One completion per prompt (single-turn rollouts).
  Experience generate_responses(const std::vector<const RolloutPrompt*>& prompts,
                                std::vector<at::Generator>& row_generators);

  offload::ParameterEngine& engine_;
  RolloutModels models_;
  ExperienceOptions options_;
  const Tokenizer& tokenizer_;
  EpisodeRunner* episodes_ = nullptr;
};

// Rows with a non-finite value where they count (score, advantage, or a masked log-prob, reference
// log-prob or value) are removed; returns how many.
int64_t drop_nonfinite_rows(Experience& experience);

// Values (B, P + R) at columns P - 1 .. P + R - 2, 0 outside the mask: (B, R) fp32.
torch::Tensor response_values(const torch::Tensor& values, int64_t prompt_length, const torch::Tensor& response_mask);
// Values (B, P + R) at each row's last response token (column P - 1 + length): (B) fp32.
torch::Tensor last_response_values(const torch::Tensor& values, int64_t prompt_length,
                                   const torch::Tensor& response_mask);

}  // namespace ferry::rl
