// The experience maker (see experience.h).
#include "train/rl/experience.h"

#include <torch/torch.h>

#include <limits>
#include <optional>

#include "core/error.h"
#include "offload/accountant.h"
#include "offload/engine.h"
#include "src/generate/prompt_batch.h"
#include "src/generate/stop_strings.h"
#include "src/metrics/metrics_clock.h"
#include "src/model/attention_mask.h"
#include "src/model/model_heads.h"
#include "src/model/lora.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/rl/advantages.h"
#include "train/rl/episode_runner.h"
#include "train/rl/policy_forward.h"
#include "train/rl/policy_losses.h"

namespace ferry::rl {

Experience Experience::select(const torch::Tensor& index) const {
  Experience out;
  auto pick = [&](const torch::Tensor& t) { return t.defined() ? t.index_select(0, index) : torch::Tensor(); };
  out.sequences = pick(sequences);
  out.attention_mask = pick(attention_mask);
  out.prompt_length = prompt_length;
  out.response_mask = pick(response_mask);
  out.logprobs = pick(logprobs);
  out.ref_logprobs = pick(ref_logprobs);
  out.values = pick(values);
  out.raw_scores = pick(raw_scores);
  out.env_rewards = pick(env_rewards);
  out.scores = pick(scores);
  out.ended = pick(ended);
  out.advantages = pick(advantages);
  out.returns = pick(returns);
  const auto rows = index.accessor<int64_t, 1>();
  for (int64_t i = 0; i < rows.size(0); ++i) {
    if (!prompt_index.empty()) out.prompt_index.push_back(prompt_index[static_cast<size_t>(rows[i])]);
    if (!responses.empty()) out.responses.push_back(responses[static_cast<size_t>(rows[i])]);
  }
  return out;
}

torch::Tensor response_values(const torch::Tensor& values, int64_t prompt_length, const torch::Tensor& response_mask) {
  const int64_t length = response_mask.size(1);
  return values.narrow(1, prompt_length - 1, length).to(torch::kFloat) *
         response_mask.to(values.device(), torch::kFloat);
}

torch::Tensor last_response_values(const torch::Tensor& values, int64_t prompt_length,
                                   const torch::Tensor& response_mask) {
  // The last counted position (a multi-turn episode's mask has holes where the environment spoke).
  // An episode that ended before its first turn (its environment faulted) has none: NaN, so the
  // row is left out of learning and counted.
  const torch::Tensor lengths = counted_lengths(response_mask.to(values.device()));
  const torch::Tensor column = prompt_length - 1 + lengths.clamp_min(1);
  const torch::Tensor last = values.gather(1, column.unsqueeze(1)).squeeze(1).to(torch::kFloat);
  return torch::where(lengths.gt(0), last, torch::full_like(last, std::numeric_limits<float>::quiet_NaN()));
}

int64_t drop_nonfinite_rows(Experience& experience) {
  const int64_t rows = experience.rows();
  if (rows == 0) return 0;
  torch::Tensor ok = torch::ones({rows}, torch::kBool);
  const torch::Tensor counted = experience.response_mask.gt(0);
  auto check_tokens = [&](const torch::Tensor& t) {
    if (t.defined()) ok &= (torch::isfinite(t) | ~counted).all(1);
  };
  check_tokens(experience.logprobs);
  check_tokens(experience.ref_logprobs);
  check_tokens(experience.values);
  if (experience.raw_scores.defined()) ok &= torch::isfinite(experience.raw_scores);
  if (experience.scores.defined()) ok &= torch::isfinite(experience.scores);
  if (experience.advantages.defined()) ok &= torch::isfinite(experience.advantages).all(1);
  const int64_t kept = ok.sum().item<int64_t>();
  if (kept == rows) return 0;
  experience = experience.select(ok.nonzero().flatten());
  return rows - kept;
}

ExperienceMaker::ExperienceMaker(offload::ParameterEngine& engine, RolloutModels models, ExperienceOptions options,
                                 const Tokenizer& tokenizer)
    : engine_(engine), models_(std::move(models)), options_(std::move(options)), tokenizer_(tokenizer) {
  FERRY_CHECK(models_.policy != nullptr, "experience maker without a policy");
  FERRY_CHECK(options_.micro_batch_size >= 1, "experience maker: micro-batch size < 1");
}

Experience ExperienceMaker::generate_responses(const std::vector<const RolloutPrompt*>& prompts,
                                               std::vector<at::Generator>& row_generators) {
  std::vector<std::vector<int64_t>> ids;
  for (const RolloutPrompt* prompt : prompts) ids.push_back(prompt->ids);
  const PromptBatch batch = left_pad(ids, options_.pad_id);
  GenerateOptions options = options_.generate;
  if (!row_generators.empty()) options.row_generators = &row_generators;
  GenerateResult result;
  {
    torch::NoGradGuard no_grad;
    result = generate(*models_.policy, batch.input_ids, batch.attention_mask, options);
  }
  Experience out;
  out.prompt_length = result.prompt_length;
  out.sequences = result.tokens.cpu();
  out.attention_mask = result.attention_mask.cpu();
  out.response_mask = out.attention_mask.narrow(1, out.prompt_length, out.sequences.size(1) - out.prompt_length)
                          .to(torch::kFloat)
                          .contiguous();
  std::vector<int64_t> stops = options.eos_token_ids;
  stops.insert(stops.end(), options.stop_token_ids.begin(), options.stop_token_ids.end());
  const StopStrings stop_strings(options.stop_strings);
  std::vector<uint8_t> ended;
  const GenerateResult on_host{out.sequences, out.attention_mask, result.logprobs.cpu(), out.prompt_length};
  for (int64_t row = 0; row < out.rows(); ++row) {
    const Completion completion = completion_of(on_host, row, tokenizer_, stops, stop_strings);
    out.responses.push_back(completion.text);
    ended.push_back(completion.stopped ? 1 : 0);
  }
  out.ended = torch::tensor(std::vector<int64_t>(ended.begin(), ended.end()), torch::kLong).to(torch::kBool);
  return out;
}

Experience ExperienceMaker::make(const std::vector<const RolloutPrompt*>& prompts,
                                 const std::vector<int64_t>& prompt_index, std::vector<at::Generator>& row_generators,
                                 ExperienceTimings* timings) {
  FERRY_CHECK(!prompts.empty() && prompts.size() == prompt_index.size(), "experience maker: bad prompt list");
  FERRY_CHECK(row_generators.size() == prompts.size() || (row_generators.empty() && options_.generate.sampling.greedy),
              "experience maker: ", row_generators.size(), " generators for ", prompts.size(), " prompts");
  ExperienceTimings local;
  ExperienceTimings& t = timings != nullptr ? *timings : local;
  const double started = monotonic_seconds();
  engine_.reset_memory_peaks();
  engine_.make_resident({models_.policy_name});
  Experience out = episodes_ != nullptr
                       ? episodes_->run(*models_.policy, options_.generate, prompts, row_generators, options_.pad_id, t.episodes)
                       : generate_responses(prompts, row_generators);
  out.prompt_index = prompt_index;
  t.generated_tokens += out.response_mask.sum().item<int64_t>();
  t.generate_seconds += monotonic_seconds() - started;
  t.generate_peak_bytes = std::max(t.generate_peak_bytes, engine_.accountant().peak(offload::MemoryTier::device));
  score(out, &t);
  return out;
}

void ExperienceMaker::score(Experience& experience, ExperienceTimings* timings) {
  ExperienceTimings local;
  ExperienceTimings& t = timings != nullptr ? *timings : local;
  const double started = monotonic_seconds();
  engine_.reset_memory_peaks();
  engine_.make_resident({});  // every model as the policy places it; the runner pages what it must
  torch::NoGradGuard no_grad;
  BackboneRunner runner(engine_, /*activation_checkpointing=*/false, options_.logits_chunk);
  const SamplingOptions& sampling = options_.generate.sampling;
  const double temperature = options_.scoring_temperature > 0 ? options_.scoring_temperature
                                                              : policy_temperature(sampling.greedy, sampling.temperature);
  const int64_t rows = experience.rows(), p = experience.prompt_length;
  std::vector<torch::Tensor> logprobs, ref_logprobs, values, scores;
  for (int64_t begin = 0; begin < rows; begin += options_.micro_batch_size) {
    const int64_t n = std::min(options_.micro_batch_size, rows - begin);
    const torch::Tensor ids = experience.sequences.narrow(0, begin, n);
    const torch::Tensor mask = experience.attention_mask.narrow(0, begin, n);
    const torch::Tensor positions = position_ids_from_attention_mask(mask);
    const torch::Tensor response_mask = experience.response_mask.narrow(0, begin, n);
    t.scored_tokens += mask.sum().item<int64_t>();
    // The sampled tokens' log-probs under `lm`, 0 outside the response mask.
    auto response_logprobs = [&](const std::string& name, CausalLMImpl& lm) {
      const kernels::LmHeadTokens lp =
          response_token_logprobs(runner, name, lm, ids, mask, p, temperature, false, options_.share_prompts);
      return (lp.logprobs * response_mask.to(lp.logprobs.device(), torch::kFloat)).cpu();
    };
    auto policy_logprobs = [&](bool adapters_off) {
      std::optional<LoraDisabled> base_only;
      if (adapters_off) base_only.emplace(*models_.policy->model);
      return response_logprobs(models_.policy_name, *models_.policy);
    };
    if (options_.policy_logprobs) logprobs.push_back(policy_logprobs(false));
    if (models_.reference_is_policy_without_lora) {
      ref_logprobs.push_back(policy_logprobs(true));
    } else if (models_.reference != nullptr) {
      ref_logprobs.push_back(response_logprobs(models_.reference_name, *models_.reference));
    }
    if (models_.critic != nullptr) {
      const torch::Tensor v = runner.score(models_.critic_name, *models_.critic, ids, mask, positions);
      values.push_back(response_values(v, p, response_mask).cpu());
    }
    if (models_.reward != nullptr) {
      const torch::Tensor v = runner.score(models_.reward_name, *models_.reward, ids, mask, positions);
      scores.push_back(last_response_values(v, p, response_mask).cpu());
    }
  }
  if (!logprobs.empty()) experience.logprobs = torch::cat(logprobs);
  if (!ref_logprobs.empty()) experience.ref_logprobs = torch::cat(ref_logprobs);
  if (!values.empty()) experience.values = torch::cat(values);
  if (!scores.empty()) experience.raw_scores = torch::cat(scores);
  t.score_seconds += monotonic_seconds() - started;
  t.score_peak_bytes = std::max(t.score_peak_bytes, engine_.accountant().peak(offload::MemoryTier::device));
}

}  // namespace ferry::rl
