// Held-out evaluation on prompts (see prompt_eval.h).
#include "train/rl/prompt_eval.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "src/generate/sampling.h"
#include "train/rl/answer_match.h"

namespace ferry::rl {

std::string PromptEvaluation::summary() const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (with_answer > 0) out << "exact match " << correct << "/" << with_answer << " (" << 100.0 * accuracy() << "%), ";
  out << std::setprecision(4);
  if (!std::isnan(mean_reward)) out << "mean reward " << mean_reward << ", ";
  if (!std::isnan(mean_env_reward)) out << "mean environment reward " << mean_env_reward << ", ";
  out << std::setprecision(2) << "mean length " << mean_length << " tokens";
  return out.str();
}

PromptEvaluation evaluate_prompts(ExperienceMaker& maker, const PromptFile& prompts, int64_t batch_size,
                                  const std::string& end_marker) {
  PromptEvaluation result;
  double reward_sum = 0.0, length_sum = 0.0, env_sum = 0.0, env_count = 0.0;
  bool rewarded = false;
  std::vector<at::Generator> greedy;  // the maker decodes greedily: nothing is drawn
  for (size_t begin = 0; begin < prompts.size(); begin += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(prompts.size(), begin + static_cast<size_t>(batch_size));
    std::vector<int64_t> index;
    for (size_t i = begin; i < end; ++i) index.push_back(static_cast<int64_t>(i));
    const LoadedPrompts loaded = prompts.load(index);
    std::vector<const RolloutPrompt*> batch;
    for (const auto& [i, prompt] : loaded) batch.push_back(&prompt);
    const Experience experience = maker.make(batch, index, greedy);
    for (int64_t row = 0; row < experience.rows(); ++row) {
      const RolloutPrompt& prompt = loaded.at(experience.prompt_index[static_cast<size_t>(row)]);
      ++result.prompts;
      if (!prompt.gt_answer.empty()) {
        ++result.with_answer;
        if (exact_match(experience.responses[static_cast<size_t>(row)], prompt.gt_answer, end_marker)) ++result.correct;
      }
    }
    length_sum += experience.response_mask.sum().item<double>();
    if (experience.raw_scores.defined()) {
      rewarded = true;
      reward_sum += experience.raw_scores.to(torch::kDouble).sum().item<double>();
    }
    if (experience.env_rewards.defined()) {  // episodes whose environment faulted (NaN) are left out
      const torch::Tensor e = experience.env_rewards.to(torch::kDouble);
      env_sum += torch::nansum(e).item<double>();
      env_count += e.isfinite().sum().item<double>();
    }
  }
  const double n = static_cast<double>(std::max<int64_t>(result.prompts, 1));
  result.mean_reward = rewarded ? reward_sum / n : std::numeric_limits<double>::quiet_NaN();
  result.mean_length = length_sum / n;
  result.mean_env_reward = env_count > 0 ? env_sum / env_count : std::numeric_limits<double>::quiet_NaN();
  return result;
}

}  // namespace ferry::rl
