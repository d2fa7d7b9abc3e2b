// The environment side of a multi-turn RL run (rollout.environment): the worker pool and the
// episode runner an experience maker hands its prompts to. Absent without rollout.environment.
#pragma once

#include <memory>
#include <ostream>

#include "core/config/config.h"

namespace ferry {
struct ChatTemplate;
class Tokenizer;
}  // namespace ferry

namespace ferry::rl {

class EnvironmentPool;
class EpisodeRunner;
class ExperienceMaker;
class HeldOutEvaluation;

class RolloutEnvironment {
 public:
  // Starts rollout.env_workers processes of rollout.environment; the tool-call format is
  // rollout.tool_call_format, or with auto the one `chat_template` writes (none for a shipped one).
  // Prints describe() to `log`.
  RolloutEnvironment(const Config& config, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                     std::ostream& log);
  ~RolloutEnvironment();

  EpisodeRunner& runner() { return *runner_; }
  // "environment `python3 calc.py` (2 workers, tool calls: hermes, <= 4 turns, <= 512 tokens)".
  std::string describe() const;

 private:
  std::unique_ptr<EnvironmentPool> pool_;
  std::unique_ptr<EpisodeRunner> runner_;
};

// The run's environment, or null without rollout.environment.
std::unique_ptr<RolloutEnvironment> make_rollout_environment(const Config& config, const Tokenizer& tokenizer,
                                                             const ChatTemplate& chat_template, std::ostream& log);
// Rollouts and held-out evaluation run episodes against `environment` (nothing when it is null).
void use_episodes(RolloutEnvironment* environment, ExperienceMaker& maker, HeldOutEvaluation& evaluation);

}  // namespace ferry::rl
