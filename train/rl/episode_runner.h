// Multi-turn episodes of a rollout (rollout.environment): one episode per prompt row, run to its
// end against the environment pool.
//
//   reset   the environment gets the prompt's line; it may add messages, append text to the last
//           user message, and give the tools the template renders
//   turn    the policy generates an assistant turn until its end of turn (or the budget); tool
//           calls are parsed from it (rollout.tool_call_format) and the environment gets a `step`
//   reply   tool results or a new user message: the template's continuation ids
//           (turn_continuation.h) are appended and the policy generates again; or `done`
//   end     at rollout.max_turns, or when a turn or a reply would pass rollout.max_total_tokens,
//           Ferry sends `end` (the environment may still give a reward)
//
// Episodes run concurrently: the episodes ready to generate do so together as soon as no other is
// waiting on its environment, as soon as the answers still due would take longer (at the
// environments' mean answer time) than a turn takes to generate, or as soon as an environment is
// slower than usual (EnvironmentPool::overdue); the environments, separate processes, keep working
// on the others meanwhile. Answers due sooner are waited for, so that turns are generated in
// batches. Each episode samples from its own generator, and generation is batch-invariant, so an
// episode's tokens do not depend on which episodes it was generated beside.
//
// The result is an Experience layout: the left-padded prompt (as the reset left it), then the
// episode's tokens: every assistant turn (response_mask 1: the only tokens with loss) and every
// continuation (response_mask 0, attention 1: context the policy saw). `responses` holds each
// episode's last assistant turn (its text outside tool calls), for rewards on the final answer;
// `env_rewards` the sum of the rewards the environment gave the episode (NaN when it faulted).
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <vector>

#include "core/config/config_enum.h"
#include "src/generate/generate.h"
#include "train/rl/episode_tally.h"
#include "train/rl/experience.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
struct ChatTemplate;
class Tokenizer;
}  // namespace ferry

namespace ferry::rl {

class EnvironmentPool;
struct EnvReply;

struct EpisodeSettings {
  int64_t max_turns = 4;
  int64_t max_total_tokens = 512;
  ToolCallFormat tool_call_format = ToolCallFormat::none;  // resolved: not auto
};

// What generates a batch of turns, with generate()'s contract (src/generate/generate.h). Rollouts use
// generate() itself; a test may stand in fixed turns (tests/parity/rl_agent_episode_parity_test.cpp).
using TurnGenerator = std::function<GenerateResult(CausalLMImpl& policy, const at::Tensor& input_ids,
                                                   const at::Tensor& attention_mask, const GenerateOptions& options)>;

class EpisodeRunner {
 public:
  // `log` gets the first error of each kind the environment causes (the rest are only counted).
  EpisodeRunner(EnvironmentPool& pool, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                EpisodeSettings settings, std::ostream& log, TurnGenerator generate_turns = ferry::generate);

  // One episode per prompt; episode i samples from row_generators[i] (empty: greedy decoding).
  // `options` gives sampling, stop ids and strings and the per-turn budget (max_new_tokens).
  // Fills sequences, attention_mask, prompt_length, response_mask, responses, ended and env_rewards.
  Experience run(CausalLMImpl& policy, const GenerateOptions& options,
                 const std::vector<const RolloutPrompt*>& prompts, std::vector<at::Generator>& row_generators,
                 int64_t pad_id, EpisodeTally& tally);

  const EpisodeSettings& settings() const { return settings_; }

 private:
  struct Episode;
  void generate_turn(CausalLMImpl& policy, const GenerateOptions& options, std::vector<Episode>& episodes,
                     const std::vector<size_t>& ready, std::vector<at::Generator>& row_generators, int64_t pad_id,
                     EpisodeTally& tally);
  void generate_batch(CausalLMImpl& policy, const GenerateOptions& options, std::vector<Episode>& episodes,
                      const std::vector<size_t>& ready, std::vector<at::Generator>& row_generators, int64_t pad_id,
                      EpisodeTally& tally);
  // Tokens the episode's next turn may take: generation.max_new_tokens, what max_total_tokens and
  // the model's positions leave.
  int64_t turn_budget(const Episode& episode, const GenerateOptions& options) const;
  void on_reply(Episode& episode, const EnvReply& reply, EpisodeTally& tally);
  void finish(Episode& episode);
  void note(const std::string& kind, const std::string& message);

  EnvironmentPool& pool_;
  const Tokenizer& tokenizer_;
  const ChatTemplate& chat_template_;
  EpisodeSettings settings_;
  std::ostream& log_;
  TurnGenerator generate_turns_;
  int64_t next_episode_ = 0;
  int64_t positions_ = 0;         // the policy's max_position_embeddings, during run()
  std::vector<int64_t> end_ids_;  // the ids that end a turn (EOS and stop ids), during run()
  double turn_seconds_ = -1;  // moving average of a batch's turn generation (-1: none yet)
  std::vector<std::string> noted_;  // kinds of errors already logged
};

}  // namespace ferry::rl
