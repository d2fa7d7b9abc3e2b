// One rollout of an RL stage, and its data-parallel sharing (see experience_gatherer.h).
#include "train/rl/experience_gatherer.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.h"
#include "src/dist/communicator.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/sampling.h"
#include "src/tokenizer/tokenizer.h"
#include "train/rl/rollout_judging.h"
#include "train/rl/shared_prompt_pack.h"
#include "train/rl/rewards.h"

namespace ferry::rl {

namespace {

uint64_t rollout_seed(int64_t seed, int64_t rollout) {
  return mix_seed(mix_seed(static_cast<uint64_t>(seed)) ^ static_cast<uint64_t>(rollout));
}

// `tensor` (B, width) placed at column `at` of a (B, new_width) tensor filled with `fill`.
torch::Tensor widen(const torch::Tensor& tensor, int64_t new_width, int64_t at, double fill) {
  if (!tensor.defined() || (tensor.size(1) == new_width && at == 0)) return tensor;
  torch::Tensor out = torch::full({tensor.size(0), new_width}, fill, tensor.options());
  out.narrow(1, at, tensor.size(1)).copy_(tensor);
  return out;
}

// `local`'s prompt columns left-padded to `prompt_length` and response columns right-padded to
// `response_length`.
Experience widened(const Experience& local, int64_t prompt_length, int64_t response_length, int64_t pad_id) {
  Experience out = local;
  const int64_t shift = prompt_length - local.prompt_length;
  const int64_t width = prompt_length + response_length;
  out.prompt_length = prompt_length;
  out.sequences = widen(local.sequences, width, shift, static_cast<double>(pad_id));
  out.attention_mask = widen(local.attention_mask, width, shift, 0);
  for (torch::Tensor* t : {&out.response_mask, &out.logprobs, &out.ref_logprobs, &out.values, &out.advantages,
                           &out.returns}) {
    *t = widen(*t, response_length, 0, 0);
  }
  return out;
}

// Every process's strings, in rank order.
std::vector<std::string> gather_strings(const std::vector<std::string>& local, dist::Communicator& comm) {
  std::vector<int64_t> lengths;
  int64_t bytes = 0;
  for (const std::string& s : local) {
    lengths.push_back(static_cast<int64_t>(s.size()));
    bytes += static_cast<int64_t>(s.size());
  }
  int64_t most = 0;
  for (const torch::Tensor& b : comm.all_gather(torch::tensor({bytes}, torch::kLong))) most = std::max(most, b.item<int64_t>());
  torch::Tensor packed = torch::zeros({std::max<int64_t>(most, 1)}, torch::kUInt8);
  int64_t at = 0;
  for (const std::string& s : local) {
    std::memcpy(packed.data_ptr<uint8_t>() + at, s.data(), s.size());
    at += static_cast<int64_t>(s.size());
  }
  const std::vector<torch::Tensor> all_lengths = comm.all_gather(torch::tensor(lengths, torch::kLong));
  const std::vector<torch::Tensor> all_bytes = comm.all_gather(packed);
  std::vector<std::string> out;
  for (size_t r = 0; r < all_bytes.size(); ++r) {
    const auto* data = reinterpret_cast<const char*>(all_bytes[r].data_ptr<uint8_t>());
    int64_t offset = 0;
    for (int64_t i = 0; i < all_lengths[r].size(0); ++i) {
      const int64_t length = all_lengths[r][i].item<int64_t>();
      out.emplace_back(data + offset, static_cast<size_t>(length));
      offset += length;
    }
  }
  return out;
}

}  // namespace

RolloutShare rollout_share(int64_t rows, const dist::Communicator* comm, const char* rows_setting) {
  const int64_t world = comm != nullptr ? comm->size() : 1;
  if (rows % world != 0) {
    throw ConfigError(detail::concat(rows_setting, ": a rollout of ", rows, " responses does not split evenly over ",
                                     world, " processes; make it a multiple of ", world));
  }
  const int64_t count = rows / world;
  return {(comm != nullptr ? comm->rank() : 0) * count, count};
}

std::vector<at::Generator> rollout_row_generators(int64_t seed, int64_t rollout, int64_t first, int64_t count) {
  const uint64_t base = rollout_seed(seed, rollout);
  std::vector<at::Generator> out;
  for (int64_t row = first; row < first + count; ++row) {
    out.push_back(row_sampling_generator(base, row));
  }
  return out;
}

at::Generator learning_generator(int64_t seed, int64_t rollout) {
  return make_sampling_generator(mix_seed(rollout_seed(seed, rollout) ^ 0x5851F42D4C957F2DULL));
}

Experience gather_experience(const Experience& local, dist::Communicator& comm, int64_t pad_id) {
  const torch::Tensor shape = torch::tensor({local.rows(), local.prompt_length, local.response_length()}, torch::kLong);
  int64_t prompt_length = 0, response_length = 0;
  for (const torch::Tensor& s : comm.all_gather(shape)) {
    FERRY_CHECK(s[0].item<int64_t>() == local.rows(), "gather_experience: the processes have ", s[0].item<int64_t>(),
                " and ", local.rows(), " rows");
    prompt_length = std::max(prompt_length, s[1].item<int64_t>());
    response_length = std::max(response_length, s[2].item<int64_t>());
  }
  const Experience wide = widened(local, prompt_length, response_length, pad_id);
  auto gathered = [&](const torch::Tensor& t) {
    return t.defined() ? torch::cat(comm.all_gather(t.contiguous()), 0) : torch::Tensor();
  };
  Experience out;
  out.prompt_length = prompt_length;
  out.sequences = gathered(wide.sequences);
  out.attention_mask = gathered(wide.attention_mask);
  out.response_mask = gathered(wide.response_mask);
  out.logprobs = gathered(wide.logprobs);
  out.ref_logprobs = gathered(wide.ref_logprobs);
  out.values = gathered(wide.values);
  out.raw_scores = gathered(wide.raw_scores);
  out.scores = gathered(wide.scores);
  out.ended = gathered(wide.ended);
  out.advantages = gathered(wide.advantages);
  out.returns = gathered(wide.returns);
  const torch::Tensor index = gathered(torch::tensor(local.prompt_index, torch::kLong));
  out.prompt_index.assign(index.data_ptr<int64_t>(), index.data_ptr<int64_t>() + index.numel());
  out.responses = gather_strings(local.responses, comm);
  return out;
}

std::vector<MicroBatchTurn> own_micro_batches(int64_t micro_batches, const dist::Communicator* comm,
                                              bool collective_forwards) {
  const int64_t world = comm != nullptr ? comm->size() : 1, rank = comm != nullptr ? comm->rank() : 0;
  std::vector<MicroBatchTurn> turns;
  for (int64_t i = rank; i < micro_batches; i += world) turns.push_back({i, false});
  const int64_t most = (micro_batches + world - 1) / world;
  while (collective_forwards && static_cast<int64_t>(turns.size()) < most) turns.push_back({0, true});
  return turns;
}

LearningShare::LearningShare(const Config& config)
    : comm(dist::process_communicator(config.distributed)),
      minibatch_rows(config.train.micro_batch_size * config.train.grad_accumulation * (comm != nullptr ? comm->size() : 1)),
      collective_forwards(comm != nullptr && comm->size() > 1 && config.distributed.zero_stage >= 3),
      share_prompts(config.train.share_prompts) {}

std::vector<torch::Tensor> LearningShare::shuffled_minibatches(int64_t rows, at::Generator& generator) const {
  const torch::Tensor order = torch::randperm(rows, generator, torch::kLong);
  std::vector<torch::Tensor> out;
  for (int64_t begin = 0; begin < rows; begin += minibatch_rows) {
    out.push_back(minibatch_rows_in_order(order.narrow(0, begin, std::min(minibatch_rows, rows - begin)), share_prompts));
  }
  return out;
}


Rollout make_rollout(ExperienceMaker& maker, RewardMix& rewards, const PromptFile& prompts,
                     const std::vector<int64_t>& indices, int64_t rollout, const RolloutSettings& settings,
                     dist::Communicator* comm) {
  Rollout out;
  out.prompts = prompts.load(indices);
  std::vector<int64_t> prompt_index;
  std::vector<const RolloutPrompt*> rows = repeat_prompts(out.prompts, indices, settings.copies, prompt_index);
  const RolloutShare share = rollout_share(static_cast<int64_t>(rows.size()), comm, settings.rows_setting);
  const auto first = static_cast<std::ptrdiff_t>(share.first), last = first + static_cast<std::ptrdiff_t>(share.count);
  const std::vector<const RolloutPrompt*> own(rows.begin() + first, rows.begin() + last);
  const std::vector<int64_t> own_index(prompt_index.begin() + first, prompt_index.begin() + last);
  std::vector<at::Generator> generators = rollout_row_generators(settings.seed, rollout, share.first, share.count);
  out.experience = maker.make(own, own_index, generators, &out.timings);
  std::vector<RewardScores::Tally> tallies = apply_rewards(rewards, out.experience, out.prompts);
  if (comm != nullptr && comm->size() > 1) {
    out.experience = gather_experience(out.experience, *comm, settings.pad_id);
    std::vector<double> sums{static_cast<double>(out.timings.generated_tokens),
                             static_cast<double>(out.timings.scored_tokens)};
    for (const RewardScores::Tally& t : tallies) sums.insert(sums.end(), {t.sum, t.count});
    const torch::Tensor summed = torch::tensor(sums, torch::kDouble);
    comm->all_reduce_sum({summed});
    const double* s = summed.data_ptr<double>();
    out.timings.generated_tokens = static_cast<int64_t>(s[0]);
    out.timings.scored_tokens = static_cast<int64_t>(s[1]);
    for (size_t i = 0; i < tallies.size(); ++i) tallies[i] = {tallies[i].name, s[2 + 2 * i], s[3 + 2 * i]};
  }
  for (const RewardScores::Tally& t : tallies) {
    if (t.count > 0) out.reward_means.push_back({t.name, t.sum / t.count});
  }
  return out;
}

ExperienceOptions rollout_options(const Config& config, const ModelShape& shape, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t pad_id) {
  ExperienceOptions options;
  options.generate = chat_generate_options(shape, tokenizer, &chat_template);
  options.generate.max_new_tokens = config.generation.max_new_tokens;
  options.generate.sampling = {config.generation.greedy, config.generation.temperature, config.generation.top_k,
                               config.generation.top_p};
  options.generate.stop_strings.insert(options.generate.stop_strings.end(), config.generation.stop_strings.begin(),
                                       config.generation.stop_strings.end());
  check_sampling_options(options.generate.sampling);
  options.generate.cuda_graphs = config.generation.cuda_graphs;
  options.generate.max_rows = config.generation.max_batch_rows;
  options.micro_batch_size = 2 * config.train.micro_batch_size;  // no gradients: no activations kept
  options.logits_chunk = config.train.logits_chunk;
  options.share_prompts = config.train.share_prompts;
  options.pad_id = pad_id;
  return options;
}

std::vector<const RolloutPrompt*> repeat_prompts(const LoadedPrompts& prompts, const std::vector<int64_t>& indices,
                                                 int64_t copies, std::vector<int64_t>& prompt_index) {
  std::vector<const RolloutPrompt*> batch;
  prompt_index.clear();
  for (int64_t i : indices) {
    for (int64_t c = 0; c < copies; ++c) {
      batch.push_back(&prompts.at(i));
      prompt_index.push_back(i);
    }
  }
  return batch;
}

}  // namespace ferry::rl
