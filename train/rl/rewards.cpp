// The reward mix (see rewards.h).
#include "train/rl/rewards.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <ostream>

#include "core/error.h"
#include "train/rl/answer_match.h"
#include "train/rl/reward_command.h"

namespace ferry::rl {

RewardMix::RewardMix(std::vector<RewardConfig> rewards, PromptCounts prompts, std::string prompt_file,
                     std::string end_marker, std::ostream& log)
    : rewards_(std::move(rewards)), prompt_file_(std::move(prompt_file)), end_marker_(std::move(end_marker)) {
  if (rewards_.empty()) throw ConfigError("rewards: no reward given; list at least one, e.g. rewards: [{kind: verifier}]");
  const int64_t with_answer = prompts.with_answer;
  for (size_t i = 0; i < rewards_.size(); ++i) {
    const RewardConfig& r = rewards_[i];
    std::string name(enum_name(r.kind));
    size_t same = 0;
    for (size_t j = 0; j < i; ++j) same += rewards_[j].kind == r.kind ? 1 : 0;
    if (same > 0) name.append("_").append(std::to_string(same + 1));
    names_.push_back(name);
    if (r.kind == RewardKind::verifier) {
      if (with_answer == 0) {
        throw ConfigError(detail::concat("rewards[", i, "]: a verifier reward needs prompts with \"gt_answer\", and ",
                                         prompt_file_, " has none; add gt_answer to the prompts or use a model or "
                                         "command reward"));
      }
      if (with_answer < prompts.prompts) {
        log << "note: rewards[" << i << "] (verifier): " << prompts.prompts - with_answer << " of " << prompts.prompts
            << " prompts in " << prompt_file_ << " have no gt_answer; their responses get no verifier reward\n";
      }
    }
    commands_.push_back(r.kind == RewardKind::command ? std::make_unique<RewardCommand>(r.command, r.timeout) : nullptr);
  }
}

RewardMix::~RewardMix() = default;

std::string RewardMix::model_path() const {
  for (const RewardConfig& r : rewards_) {
    if (r.kind == RewardKind::model) return r.path;
  }
  return {};
}

std::string RewardMix::describe() const {
  std::string out;
  for (const RewardConfig& r : rewards_) {
    if (!out.empty()) out += " + ";
    switch (r.kind) {
      case RewardKind::verifier: out += "verifier (" + std::string(enum_name(r.match)) + ")"; break;
      case RewardKind::model: out += "reward model " + r.path; break;
      case RewardKind::command: out += "command `" + r.command + "`"; break;
      case RewardKind::environment: out += "environment"; break;
    }
    if (r.weight != 1.0) out += detail::concat(" x ", r.weight);
  }
  return out;
}

RewardScores RewardMix::score(const std::vector<std::string>& responses, const std::vector<const RolloutPrompt*>& prompts,
                              const std::vector<double>& model_scores, const std::vector<double>& env_rewards) {
  FERRY_CHECK(responses.size() == prompts.size(), "reward mix: ", responses.size(), " responses for ", prompts.size(), " prompts");
  const size_t rows = responses.size();
  RewardScores out;
  out.total.assign(rows, 0.0);
  for (size_t k = 0; k < rewards_.size(); ++k) {
    const RewardConfig& r = rewards_[k];
    std::vector<double> values(rows, 0.0);
    std::vector<bool> scored(rows, true);
    switch (r.kind) {
      case RewardKind::verifier:
        for (size_t i = 0; i < rows; ++i) {
          scored[i] = !prompts[i]->gt_answer.empty();
          values[i] = scored[i] && answer_matches(responses[i], prompts[i]->gt_answer, r.match, end_marker_) ? 1.0 : 0.0;
        }
        break;
      case RewardKind::model:
        FERRY_CHECK(model_scores.size() == rows, "reward mix: no reward model scores");
        values = model_scores;
        break;
      case RewardKind::command: {
        std::vector<std::string> requests;
        for (size_t i = 0; i < rows; ++i) {
          nlohmann::json line{{"prompt", prompts[i]->text}, {"response", responses[i]}};
          if (!prompts[i]->gt_answer.empty()) line["gt_answer"] = prompts[i]->gt_answer;
          // As TRL hands a reward function its completions: text for a text prompt, else the
          // assistant message; and every column of the data row, as TRL's **kwargs.
          line["completion"] = prompts[i]->conversational
                                   ? nlohmann::json::array({{{"role", "assistant"}, {"content", responses[i]}}})
                                   : nlohmann::json(responses[i]);
          line["row"] = nlohmann::json::parse(prompts[i]->source, nullptr, false);
          requests.push_back(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        }
        values = commands_[k]->score(requests, [&](size_t i) {
          std::string text = prompts[i]->text.substr(0, 60);
          if (prompts[i]->text.size() > 60) text += "...";
          return detail::concat("the prompt on line ", prompts[i]->line, " of ", prompt_file_, " (\"", text, "\")");
        });
        break;
      }
      case RewardKind::environment:
        FERRY_CHECK(env_rewards.size() == rows, "reward mix: no environment rewards");
        values = env_rewards;
        break;
    }
    double sum = 0, count = 0;
    for (size_t i = 0; i < rows; ++i) {
      if (!scored[i]) continue;
      out.total[i] += r.weight * values[i];
      if (std::isfinite(values[i])) {
        sum += values[i];
        count += 1;
      }
    }
    if (count > 0) out.means.emplace_back("reward/" + names_[k], sum / count);
    out.tallies.push_back({"reward/" + names_[k], sum, count});
  }
  return out;
}

namespace {

std::vector<RewardConfig> environment_reward() {
  RewardConfig environment;
  environment.kind = RewardKind::environment;
  return {environment};
}

}  // namespace

std::vector<RewardConfig> ppo_rewards(const Config& config) {
  if (!config.rewards.empty()) return config.rewards;
  if (!config.rollout.environment.empty()) return environment_reward();
  if (config.ppo.reward_model.empty()) {
    throw ConfigError("ppo.reward_model: PPO needs a reward: a reward model folder (from `ferry train-rm`) in "
                      "ppo.reward_model, or a `rewards:` list (e.g. [{kind: verifier}])");
  }
  RewardConfig model;
  model.kind = RewardKind::model;
  model.path = config.ppo.reward_model;
  return {model};
}

std::vector<RewardConfig> grpo_rewards(const Config& config, const std::string& stage) {
  if (!config.rewards.empty()) return config.rewards;
  if (!config.rollout.environment.empty()) return environment_reward();
  throw ConfigError("rewards: " + stage + " learns from rewards you list, e.g. rewards: [{kind: verifier}] (the answer "
                    "against each prompt's gt_answer), a reward model, a command, or an environment's "
                    "(rollout.environment); see configs/README.md");
}

}  // namespace ferry::rl
