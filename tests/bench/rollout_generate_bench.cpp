// RL generation against `ferry generate`'s path in one process: the rollout's generation phase
// (ExperienceMaker::make's time/generate, on the policy a `ferry train-grpo` run sets up: engine,
// packed weights, rollout options) and generate() on the same model loaded as `ferry generate`
// loads it (cli/inference_model.h), on the same rows with the same generation options and row
// generators, alternating which goes first. Between processes this host's speed drifts by up to
// 30%, more than the difference asked about; in one process both sides see the same machine.
// Prints each call's seconds, checks both produced the same tokens and prints the median ratio.
// scripts/bench-rollout.sh runs it on SmolLM2-135M-Instruct.
//
//   rollout_generate_bench --config configs/demo-grpo.yaml [--set key=value ...] [--repeats 4]
// The first grpo.generation_batch_size / grpo.num_generations prompt lines of data.prompt_file,
// each grpo.num_generations times, as the run's first rollout takes them unshuffled.
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "cli/huge_pages.h"
#include "cli/inference_model.h"
#include "core/config/config_io.h"
#include "core/error.h"
#include "src/generate/generate.h"
#include "src/generate/prompt_batch.h"
#include "src/io/model_path.h"
#include "src/metrics/metrics_clock.h"
#include "train/model_setup.h"
#include "train/rl/experience_gatherer.h"
#include "train/rl/rl_start.h"
#include "train/rl/rewards.h"
#include "train/run_engine.h"

namespace {

using namespace ferry;

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run(int argc, char** argv) {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t repeats = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw UserError("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--config") config_path = value;
    else if (flag == "--set") overrides.push_back(value);
    else if (flag == "--repeats") repeats = std::stoll(value);
    else throw UserError("unknown flag " + flag + " (--config, --set, --repeats)");
  }
  if (config_path.empty() || repeats < 1) {
    throw UserError("usage: rollout_generate_bench --config F [--set k=v ...] [--repeats N >= 1]");
  }
  Config config = load_config(config_path, overrides);
  config.model.path = io::resolve_model_path(config.model.path).string();  // a GGUF file too, as a stage resolves it
  const GrpoConfig& g = config.grpo;

  // The RL side, set up as run_grpo (stages/grpo.cpp) sets it up.
  rl::RlStart start(config, "GRPO", rl::grpo_rewards(config));
  rl::FrozenRlModels frozen;  // the rollout's generation uses the policy alone
  auto engine = make_run_engine(config, start.loaded.shape, start.device, std::cerr, 1);
  const rl::RolloutModels models = rl::register_rl_models(*engine, *start.loaded.model, frozen, nullptr, start.device);
  const int64_t pad_id = stage_pad_id(start.loaded.shape, start.tokenizer);
  const rl::ExperienceOptions options =
      rl::rollout_options(config, start.loaded.shape, start.tokenizer, start.chat_template, pad_id);
  rl::ExperienceMaker maker(*engine, models, options, start.tokenizer);

  const int64_t prompt_count = g.generation_batch_size / g.num_generations;
  if (prompt_count > static_cast<int64_t>(start.prompts.size())) {
    throw UserError(ferry::detail::concat(config.data.prompt_file, " has ", start.prompts.size(),
                                          " prompts; the rollout takes ", prompt_count));
  }
  std::vector<int64_t> indices(static_cast<size_t>(prompt_count));
  std::iota(indices.begin(), indices.end(), 0);
  const rl::LoadedPrompts loaded_prompts = start.prompts.load(indices);
  std::vector<int64_t> prompt_index;
  const std::vector<const rl::RolloutPrompt*> rows =
      rl::repeat_prompts(loaded_prompts, indices, g.num_generations, prompt_index);
  const int64_t row_count = static_cast<int64_t>(rows.size());
  const bool greedy = options.generate.sampling.greedy;
  auto generators = [&] {
    return greedy ? std::vector<at::Generator>{} : rl::rollout_row_generators(config.train.seed, 0, 0, row_count);
  };

  // `ferry generate`'s side: the model and the generation options as it derives them (its --chat
  // template's stops), the rollout's rows, sampling, length and rows at once.
  cli::InferenceModel inference = cli::load_inference_model(config.model.path);
  GenerateOptions generate_options = inference.generate_options(&start.chat_template);
  generate_options.max_new_tokens = options.generate.max_new_tokens;
  generate_options.sampling = options.generate.sampling;
  generate_options.max_rows = options.generate.max_rows;
  if (generate_options.eos_token_ids != options.generate.eos_token_ids ||
      generate_options.stop_token_ids != options.generate.stop_token_ids ||
      generate_options.stop_strings != options.generate.stop_strings ||
      generate_options.pad_token_id != options.generate.pad_token_id) {
    throw InternalError("ferry generate and the rollout derive different stops or padding from this model and "
                        "template");
  }
  std::vector<std::vector<int64_t>> ids;
  for (const rl::RolloutPrompt* row : rows) ids.push_back(row->ids);
  const PromptBatch batch = left_pad(ids, pad_id);

  std::cout << "rollout_generate_bench: " << row_count << " rows (" << prompt_count << " prompts x "
            << g.num_generations << "), " << options.generate.max_rows << " decoding at once (0: all), at most "
            << options.generate.max_new_tokens << " new tokens, " << (greedy ? "greedy" : "sampled") << ", "
            << at::get_num_threads() << " threads, " << repeats << " repeats\n";
  std::vector<double> rl_seconds, generate_seconds, ratios;
  for (int64_t repeat = 0; repeat < repeats; ++repeat) {
    double rl_time = 0, generate_time = 0;
    int64_t rl_tokens = 0, generate_tokens = 0;
    torch::Tensor rl_sequences, generate_sequences;
    for (int side = 0; side < 2; ++side) {
      if ((side == 0) == (repeat % 2 == 0)) {
        std::vector<at::Generator> row_generators = generators();
        rl::ExperienceTimings timings;
        const rl::Experience experience = maker.make(rows, prompt_index, row_generators, &timings);
        rl_time = timings.generate_seconds;
        rl_tokens = timings.generated_tokens;
        rl_sequences = experience.sequences;
      } else {
        std::vector<at::Generator> row_generators = generators();
        generate_options.row_generators = greedy ? nullptr : &row_generators;
        const double started = monotonic_seconds();
        const GenerateResult result =
            generate(*inference.model, batch.input_ids, batch.attention_mask, generate_options);
        generate_time = monotonic_seconds() - started;
        generate_tokens =
            result.attention_mask.narrow(1, result.prompt_length, result.logprobs.size(1)).sum().item<int64_t>();
        generate_sequences = result.tokens.cpu();
      }
    }
    if (rl_tokens != generate_tokens || !torch::equal(rl_sequences, generate_sequences)) {
      throw InternalError(ferry::detail::concat("repeat ", repeat + 1, ": the rollout and generate() gave different ",
                                                "tokens (", rl_tokens, " and ", generate_tokens, " counted)"));
    }
    rl_seconds.push_back(rl_time);
    generate_seconds.push_back(generate_time);
    ratios.push_back(generate_time / rl_time);
    std::cout << "repeat " << repeat + 1 << " (" << (repeat % 2 == 0 ? "rollout first" : "generate first")
              << "): rollout " << rl_time << " s, generate() " << generate_time << " s, " << rl_tokens
              << " tokens each: RL / generate speed " << ratios.back() << "\n";
  }
  const double rl_total = std::accumulate(rl_seconds.begin(), rl_seconds.end(), 0.0);
  const double generate_total = std::accumulate(generate_seconds.begin(), generate_seconds.end(), 0.0);
  std::cout << "in one process, the same tokens: RL generation speed / ferry generate's: median " << median(ratios)
            << ", ratio of the totals " << generate_total / rl_total << " (target >= 1); calls of one side ranged "
            << *std::min_element(rl_seconds.begin(), rl_seconds.end()) << "-"
            << *std::max_element(rl_seconds.begin(), rl_seconds.end()) << " s (rollout), "
            << *std::min_element(generate_seconds.begin(), generate_seconds.end()) << "-"
            << *std::max_element(generate_seconds.begin(), generate_seconds.end()) << " s (generate())\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ferry::cli::enable_huge_pages();  // as ferry's main does, before the first allocation
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "rollout_generate_bench: " << e.what() << "\n";
    return 2;
  }
}
