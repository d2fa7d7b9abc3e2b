// Episode figures (see episode_tally.h).
#include "train/rl/episode_tally.h"

#include <algorithm>

namespace ferry::rl {

void EpisodeTally::add(const EpisodeTally& o) {
  episodes += o.episodes;
  turns += o.turns;
  tool_calls += o.tool_calls;
  invalid_tool_calls += o.invalid_tool_calls;
  done += o.done;
  max_turns += o.max_turns;
  truncated += o.truncated;
  crash += o.crash;
  timeout += o.timeout;
  malformed += o.malformed;
  tokens += o.tokens;
  policy_tokens += o.policy_tokens;
  generate_seconds += o.generate_seconds;
  generate_overlap_seconds += o.generate_overlap_seconds;
  env_wait_seconds += o.env_wait_seconds;
  env_answer_seconds += o.env_answer_seconds;
  env_requests += o.env_requests;
}

MetricValues EpisodeTally::metrics() const {
  if (episodes == 0) return {};
  const double n = static_cast<double>(episodes);
  return {
      {"episode/turns", static_cast<double>(turns) / n},
      {"episode/tool_calls", static_cast<double>(tool_calls) / n},
      {"episode/invalid_tool_calls", static_cast<double>(invalid_tool_calls) / n},
      {"episode/length", static_cast<double>(tokens) / n},
      {"episode/policy_tokens", static_cast<double>(policy_tokens) / n},
      {"episode/done_fraction", static_cast<double>(done) / n},
      {"episode/max_turns_fraction", static_cast<double>(max_turns) / n},
      {"episode/truncated_fraction", static_cast<double>(truncated) / n},
      {"episode/env_crash", static_cast<double>(crash)},
      {"episode/env_timeout", static_cast<double>(timeout)},
      {"episode/env_malformed", static_cast<double>(malformed)},
      {"time/episode_generate", generate_seconds},
      {"time/generate_while_env_busy", generate_overlap_seconds},
      {"time/env_wait", env_wait_seconds},
      {"env/answer_ms", env_requests > 0 ? 1000.0 * env_answer_seconds / static_cast<double>(env_requests) : 0.0},
  };
}

}  // namespace ferry::rl
