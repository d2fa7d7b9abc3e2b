// The RL stages' rollout loop (see rollout_loop.h).
#include "train/rl/rollout_loop.h"

#include <algorithm>
#include <iostream>

#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_clock.h"
#include "train/rl/rl_run_lifecycle.h"
#include "train/rl/rollout_judging.h"

namespace ferry::rl {

void run_rollout_loop(RlRunLifecycle& run, int64_t total, const RolloutSources& sources, RlAlgorithm& algorithm) {
  const RolloutSettings& settings = sources.settings;
  dist::Communicator* comm = run.communicator();
  PhasePeaks& peaks = run.peaks;
  while (run.rollout < total) {
    const double started = monotonic_seconds();
    const std::vector<int64_t> indices = sources.sampler.next(static_cast<size_t>(sources.prompts_per_rollout));
    Rollout made = make_rollout(sources.maker, sources.rewards, sources.prompts, indices, run.rollout, settings, comm);
    Experience& experience = made.experience;
    at::Generator generator = learning_generator(settings.seed, run.rollout);
    peaks.add(made.timings);
    const Experience as_sampled = experience;  // the figures count every sampled row
    // On verifiable prompts (gt_answer): how many sampled answers are right, and the reward of
    // right and wrong ones — whether the reward points where exact match does.
    const MetricValues judged = judge_responses(experience, made.prompts, sources.end_marker);
    algorithm.before_drop(experience);
    const int64_t sampled = experience.rows();
    const int64_t dropped = drop_nonfinite_rows(experience);
    run.dropped_rows += dropped;
    if (dropped > 0) {
      std::cout << "warning: rollout " << run.rollout + 1 << ": " << dropped << " of " << sampled << " "
                << algorithm.row_name() << "s had a non-finite " << algorithm.nonfinite_what()
                << " and were left out\n";
    }
    double learn_seconds = 0;
    std::optional<LearnedRollout> learned;
    if (experience.rows() > 0) {
      algorithm.before_learn(experience);
      sources.engine.reset_memory_peaks();
      const double learn_started = monotonic_seconds();
      learned = algorithm.learn(experience, generator);
      learn_seconds = monotonic_seconds() - learn_started;
      peaks.learn = std::max(peaks.learn, sources.engine.accountant().peak(offload::MemoryTier::device));
      run.skipped_steps += learned->skipped_steps;
      learned->values.push_back(
          {"tokens_per_s/learn", static_cast<double>(learned->tokens) / std::max(learn_seconds, 1e-9)});
    } else {
      std::cout << "warning: rollout " << run.rollout + 1 << ": no " << algorithm.row_name()
                << " left to learn from; " << algorithm.not_updated() << "\n";
    }
    MetricValues values = algorithm.values(made, as_sampled, learned ? &learned->values : nullptr);
    values.insert(values.end(), judged.begin(), judged.end());
    const MetricValues figures = rollout_figures(as_sampled, made.timings, learn_seconds, monotonic_seconds() - started);
    values.insert(values.end(), figures.begin(), figures.end());
    run.end_rollout(values, sources.sampler.cursor());
  }
  run.end(sources.sampler.cursor());
}

}  // namespace ferry::rl
