// The environment of a multi-turn run (see rollout_environment.h).
#include "train/rl/rollout_environment.h"

#include "core/error.h"
#include "src/generate/tool_call_parser.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/jinja_chat_template.h"
#include "train/rl/environment_pool.h"
#include "train/rl/episode_runner.h"
#include "train/rl/experience.h"
#include "train/rl/rollout_judging.h"

namespace ferry::rl {

RolloutEnvironment::RolloutEnvironment(const Config& config, const Tokenizer& tokenizer,
                                       const ChatTemplate& chat_template, std::ostream& log) {
  const RolloutConfig& r = config.rollout;
  EpisodeSettings settings;
  settings.max_turns = r.max_turns;
  settings.max_total_tokens = r.max_total_tokens;
  settings.tool_call_format = tool_call_format_of(
      chat_template.jinja != nullptr ? std::string_view(chat_template.jinja->source_text()) : std::string_view(),
      r.tool_call_format);
  pool_ = std::make_unique<EnvironmentPool>(r.environment, r.env_workers, r.env_timeout);
  runner_ = std::make_unique<EpisodeRunner>(*pool_, tokenizer, chat_template, settings, log);
  log << "rollout: multi-turn episodes against " << describe() << ", " << r.env_workers << " worker(s)\n";
}

RolloutEnvironment::~RolloutEnvironment() = default;

std::string RolloutEnvironment::describe() const {
  const EpisodeSettings& s = runner_->settings();
  return detail::concat("environment `", pool_->command(), "` (tool calls: ", enum_name(s.tool_call_format), ", <= ",
                        s.max_turns, " turns, <= ", s.max_total_tokens, " tokens after the prompt)");
}

std::unique_ptr<RolloutEnvironment> make_rollout_environment(const Config& config, const Tokenizer& tokenizer,
                                                             const ChatTemplate& chat_template, std::ostream& log) {
  if (config.rollout.environment.empty()) return nullptr;
  return std::make_unique<RolloutEnvironment>(config, tokenizer, chat_template, log);
}

void use_episodes(RolloutEnvironment* environment, ExperienceMaker& maker, HeldOutEvaluation& evaluation) {
  if (environment == nullptr) return;
  maker.set_episodes(&environment->runner());
  evaluation.set_episodes(&environment->runner());
}

}  // namespace ferry::rl
