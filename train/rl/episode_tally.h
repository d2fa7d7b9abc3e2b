// What the multi-turn episodes of a rollout did (rollout.environment), for the metrics: turns,
// tool calls, how episodes ended, and where the time went (the policy generating, or the
// generator idle while environments answer).
#pragma once

#include <cstdint>

#include "src/metrics/metrics_row.h"

namespace ferry::rl {

struct EpisodeTally {
  int64_t episodes = 0;
  int64_t turns = 0;                 // assistant turns generated
  int64_t tool_calls = 0;            // parsed from assistant turns
  int64_t invalid_tool_calls = 0;    // tool-call markup that did not parse (passed on as such)
  int64_t done = 0;                  // ended by the environment ("done": true)
  int64_t max_turns = 0;             // ended by rollout.max_turns
  int64_t truncated = 0;             // a turn cut by generation.max_new_tokens or rollout.max_total_tokens
  int64_t crash = 0, timeout = 0, malformed = 0;  // ended by an environment fault
  int64_t tokens = 0;                // episode tokens after the prompt
  int64_t policy_tokens = 0;         // of which the policy sampled
  double generate_seconds = 0;       // in the model's generate()
  double generate_overlap_seconds = 0;  // of which with requests at the environments
  double env_wait_seconds = 0;       // with nothing to generate, waiting for environments
  double env_answer_seconds = 0;     // summed over requests: until the environment answered
  int64_t env_requests = 0;

  void add(const EpisodeTally& other);
  // "episode/turns", "episode/tool_calls", ..., "time/env_wait", "env/answer_ms"; empty when no episode ran.
  MetricValues metrics() const;
};

}  // namespace ferry::rl
