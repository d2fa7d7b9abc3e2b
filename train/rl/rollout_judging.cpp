// What a rollout is judged by (see rollout_judging.h).
#include "train/rl/rollout_judging.h"

#include <cmath>
#include <iostream>

#include "core/byte_size.h"
#include "core/error.h"
#include "offload/engine.h"
#include "src/metrics/metrics_clock.h"
#include "train/rl/answer_match.h"
#include "train/rl/rewards.h"

namespace ferry::rl {

std::vector<RewardScores::Tally> apply_rewards(RewardMix& rewards, Experience& experience,
                                               const LoadedPrompts& prompts) {
  std::vector<const RolloutPrompt*> rows;
  for (int64_t i : experience.prompt_index) rows.push_back(&prompts.at(i));
  std::vector<double> model_scores;
  if (!rewards.model_path().empty()) {
    const torch::Tensor s = experience.raw_scores.to(torch::kDouble).contiguous();
    model_scores.assign(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
  }
  std::vector<double> env_rewards;
  if (experience.env_rewards.defined()) {
    const torch::Tensor e = experience.env_rewards.to(torch::kDouble).contiguous();
    env_rewards.assign(e.data_ptr<double>(), e.data_ptr<double>() + e.numel());
  }
  const RewardScores scored = rewards.score(experience.responses, rows, model_scores, env_rewards);
  experience.raw_scores = torch::tensor(scored.total, torch::kDouble).to(torch::kFloat);
  return scored.tallies;
}

MetricValues judge_responses(const Experience& experience, const LoadedPrompts& prompts, const std::string& end_marker) {
  double right = 0, judged = 0, right_reward = 0, wrong_reward = 0;
  for (int64_t row = 0; row < experience.rows(); ++row) {
    const RolloutPrompt& prompt = prompts.at(experience.prompt_index[static_cast<size_t>(row)]);
    if (prompt.gt_answer.empty()) continue;
    const bool ok = exact_match(experience.responses[static_cast<size_t>(row)], prompt.gt_answer, end_marker);
    const double r = experience.raw_scores[row].item<double>();
    judged += 1;
    right += ok ? 1 : 0;
    (ok ? right_reward : wrong_reward) += r;
  }
  MetricValues values;
  if (judged > 0) {
    values.push_back({"exact_match", right / judged});
    if (right > 0) values.push_back({"reward/right", right_reward / right});
    if (right < judged) values.push_back({"reward/wrong", wrong_reward / (judged - right)});
  }
  return values;
}

void PhasePeaks::add(const ExperienceTimings& timings) {
  generate = std::max(generate, timings.generate_peak_bytes);
  score = std::max(score, timings.score_peak_bytes);
}

std::string PhasePeaks::summary(const std::string& command, uint64_t budget) const {
  std::string out = detail::concat(command, ": engine peak device bytes per phase (weights, gradients, optimizer state; activations too on a CPU run): generation ",
                                   format_bytes_approx(generate), " (", generate, " bytes), scoring ",
                                   format_bytes_approx(score), " (", score, " bytes), learning ",
                                   format_bytes_approx(learn), " (", learn, " bytes)");
  if (budget > 0) out += detail::concat("; budget ", budget, " bytes");
  return out;
}

nlohmann::json PhasePeaks::json() const { return {{"generate", generate}, {"score", score}, {"learn", learn}}; }

MetricValues rollout_figures(const Experience& experience, const ExperienceTimings& timings, double learn_seconds,
                             double rollout_seconds) {
  MetricValues values;
  if (experience.rows() > 0) {
    values.push_back({"response_length", experience.response_mask.sum(1).mean().item<double>()});
    values.push_back({"ended_fraction", experience.ended.to(torch::kFloat).mean().item<double>()});
  }
  values.push_back({"time/generate", timings.generate_seconds});
  values.push_back({"time/score", timings.score_seconds});
  values.push_back({"time/learn", learn_seconds});
  values.push_back({"time/rollout", rollout_seconds});
  values.push_back({"tokens_per_s/generate",
                    static_cast<double>(timings.generated_tokens) / std::max(timings.generate_seconds, 1e-9)});
  values.push_back({"tokens_per_s/score", static_cast<double>(timings.scored_tokens) / std::max(timings.score_seconds, 1e-9)});
  const MetricValues episodes = timings.episodes.metrics();
  values.insert(values.end(), episodes.begin(), episodes.end());
  return values;
}

HeldOutEvaluation::HeldOutEvaluation(const Config& config, offload::ParameterEngine& engine, RolloutModels models,
                                     ExperienceOptions options, const Tokenizer& tokenizer,
                                     const ChatTemplate& chat_template, std::string command)
    : batch_size_(std::max<int64_t>(config.train.micro_batch_size, 32)),
      end_marker_(chat_template.assistant_suffix),
      file_(config.data.eval_file),
      command_(std::move(command)) {
  if (file_.empty()) return;
  prompts_ = PromptFile(file_, tokenizer, chat_template, {config.data.max_length, config.data.skip_bad_lines, 0, RowFormat::from_config(config.data)},
                        std::cout);
  options.generate.sampling.greedy = true;
  options.policy_logprobs = false;
  models.reference = nullptr;
  models.reference_is_policy_without_lora = false;
  models.critic = nullptr;
  maker_ = std::make_unique<ExperienceMaker>(engine, models, options, tokenizer);
}

HeldOutEvaluation::~HeldOutEvaluation() = default;

void HeldOutEvaluation::set_episodes(EpisodeRunner* runner) {
  if (maker_ != nullptr) maker_->set_episodes(runner);
}

nlohmann::json HeldOutEvaluation::run(const char* when) {
  if (prompts_.empty()) return nullptr;
  const double started = monotonic_seconds();
  const PromptEvaluation e = evaluate_prompts(*maker_, prompts_, batch_size_, end_marker_);
  std::cout << command_ << ": " << when << ": " << file_ << ": " << e.summary() << " ("
            << monotonic_seconds() - started << " s)\n";
  nlohmann::json j{{"prompts", e.prompts}, {"with_answer", e.with_answer}, {"correct", e.correct},
                   {"accuracy", e.accuracy()}, {"mean_length", e.mean_length}};
  if (!std::isnan(e.mean_reward)) j["mean_reward"] = e.mean_reward;
  if (!std::isnan(e.mean_env_reward)) j["mean_env_reward"] = e.mean_env_reward;
  return j;
}

}  // namespace ferry::rl
