// One rollout of an RL stage (PPO, GRPO): its prompts, each repeated for a group of responses;
// generation and scoring; the rewards; and, in a data-parallel run, the sharing of its rows.
//
// Data parallelism (torchrun / `ferry launch`): the rollout's response rows are split into equal,
// contiguous shares, one per process in rank order. Each process generates, scores and rewards its
// share, then gather_experience hands every process the whole rollout in row order, so that
// advantages, reward statistics, the KL controller and the learning phase's minibatches are those
// of one process. Every row samples from its own generator (a function of the seed, the rollout
// and the row's number in the rollout), so the tokens a row gets do not depend on which process
// generates it or beside which other rows: N processes sample what one would.
#pragma once

#include <ATen/core/Generator.h>

#include <cstdint>
#include <vector>

#include "core/config/config.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/experience.h"
#include "train/rl/prompt_dataset.h"

namespace ferry {
namespace dist {
class Communicator;
}
struct ChatTemplate;
struct ModelShape;
class Tokenizer;
}  // namespace ferry

namespace ferry::rl {

class ExperienceMaker;
class RewardMix;

// Sampling (generation.*), stop ids and strings, and a scoring micro-batch of 2 x train.micro_batch_size.
ExperienceOptions rollout_options(const Config& config, const ModelShape& shape, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t pad_id);

// The prompts `indices` name (loaded from `prompts`), each `copies` times in a row, as a rollout
// takes them; prompt_index gets their indices.
std::vector<const RolloutPrompt*> repeat_prompts(const LoadedPrompts& prompts, const std::vector<int64_t>& indices,
                                                 int64_t copies, std::vector<int64_t>& prompt_index);

// The rows of a rollout this process generates: [first, first + count).
struct RolloutShare {
  int64_t first = 0, count = 0;
};
// `rows` split over the processes of `comm` (null: one process, all of them). ConfigError naming
// `rows_setting` when they do not split evenly.
RolloutShare rollout_share(int64_t rows, const dist::Communicator* comm, const char* rows_setting);

// One generator per row of rollout `rollout` (0-based), rows [first, first + count), and the one
// the learning phase shuffles with (the same in every process): pure functions of the seed, the
// rollout and the row, so a resumed run draws what an uninterrupted one would.
std::vector<at::Generator> rollout_row_generators(int64_t seed, int64_t rollout, int64_t first, int64_t count);
at::Generator learning_generator(int64_t seed, int64_t rollout);

// Every process's `local` experience (the same number of rows each, in rank order), as one: the
// prompt columns left-padded and the response columns right-padded to the widest (pad_id tokens,
// zero masks and values), rows in rank order, responses and prompt indices gathered too. The
// tensors gathered are those defined in `local` (the same ones in every process).
Experience gather_experience(const Experience& local, dist::Communicator& comm, int64_t pad_id);

// A rollout as every process sees it.
struct Rollout {
  LoadedPrompts prompts;     // the rollout's prompts, by index
  Experience experience;     // every row, rewarded (raw_scores); in a data-parallel run gathered
  MetricValues reward_means; // "reward/<name>": the mean of each reward over the rows it scored
  // This process's phase times; the token counts summed over the processes.
  ExperienceTimings timings;
};

// The learning phase's share: micro-batch i of a minibatch of `micro_batches` goes to process
// i mod N (all of them to a single process). Under ZeRO 3 (`collective_forwards`: the weights page
// in collectively) every process must run as many forwards, so one short of a micro-batch runs
// micro-batch 0 again as `padding`, its loss weighted 0 and its figures not counted.
struct MicroBatchTurn {
  int64_t index = 0;
  bool padding = false;
};
std::vector<MicroBatchTurn> own_micro_batches(int64_t micro_batches, const dist::Communicator* comm,
                                              bool collective_forwards);

// A learning phase's share of the work in a data-parallel run: the processes (null: one), the
// minibatch in rows (train.micro_batch_size x train.grad_accumulation x the processes), and
// whether forwards are collective (ZeRO 3 over several processes).
struct LearningShare {
  explicit LearningShare(const Config& config);
  dist::Communicator* comm = nullptr;
  int64_t minibatch_rows = 0;
  bool collective_forwards = false;
  bool share_prompts = false;  // train.share_prompts

  // Minibatches (optimizer steps) of one pass over `rows` rows.
  int64_t minibatches(int64_t rows) const { return (rows + minibatch_rows - 1) / minibatch_rows; }
  // One pass over `rows` rows: each minibatch's rows ((n) int64), drawn in a random order from
  // `generator`, sorted back into rollout order under share_prompts (minibatch_rows_in_order).
  std::vector<torch::Tensor> shuffled_minibatches(int64_t rows, at::Generator& generator) const;

  // This process's micro-batches of a minibatch of `micro_batches` (own_micro_batches).
  std::vector<MicroBatchTurn> turns(int64_t micro_batches) const {
    return own_micro_batches(micro_batches, comm, collective_forwards);
  }
};

// What make_rollout needs besides the prompts.
struct RolloutSettings {
  int64_t copies = 1;  // responses per prompt
  int64_t seed = 0;    // train.seed
  int64_t pad_id = 0;
  const char* rows_setting = "";  // the keys that size a rollout, for rollout_share's error
};

// Loads the prompts `indices` name, repeats each `copies` times, generates and scores this
// process's share of the rows with `maker` (rollout number `rollout`, 0-based), applies
// `rewards`, and gathers the rollout.
Rollout make_rollout(ExperienceMaker& maker, RewardMix& rewards, const PromptFile& prompts,
                     const std::vector<int64_t>& indices, int64_t rollout, const RolloutSettings& settings,
                     dist::Communicator* comm);

}  // namespace ferry::rl
