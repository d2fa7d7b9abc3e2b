// An RL stage's run around its rollouts, the same for PPO and GRPO: resuming from output.dir
// (train.resume), the metrics logger, checkpoints step-N/ (N rollouts: a Hugging Face folder per
// trained model, the engine's optimizer state, trainer_state.json with the prompt cursor, the
// random generators, ppo_state.json), SIGINT/SIGTERM (finish the rollout, save, exit saying how to
// resume), and the final folders: final/ for the policy (LoRA as lora.export says), final_<name>/
// for any other trained model (PPO's critic). In a data-parallel run rank 0 logs and writes; every
// process writes its optimizer-state shard under ZeRO, a signal to any process stops them all.
// Checkpoints, resume and the final folders are train/run_lifecycle.h's, as the trainer's are.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "src/data/epoch_order.h"
#include "src/metrics/metrics_row.h"
#include "train/rl/rl_run_state.h"
#include "train/rl/rollout_judging.h"
#include "train/run_lifecycle.h"
#include "train/trainer.h"

namespace ferry {
class MetricsLogger;
class StopSignal;
}  // namespace ferry

namespace ferry::rl {

class RlRunLifecycle {
 public:
  // `models[0]` is the policy. `before_save` copies what the stage keeps (KL coefficient, optimizer
  // steps, cursors) into `state` before each checkpoint.
  RlRunLifecycle(const Config& config, offload::ParameterEngine& engine, std::string command, std::vector<CheckpointedModel> models,
                 std::function<void(RlRunState&)> before_save);
  ~RlRunLifecycle();

  // Loads the checkpoint train.resume names, if any (weights, optimizer state, generators, state);
  // false when the run starts fresh.
  bool resume(int64_t total_rollouts);
  // Starts the metrics logger and, on a CPU run, the activation meter (the phases' device peaks
  // then count everything a phase holds); call once, before the first rollout.
  void start();
  // After each rollout: logs `values` (and dropped_rows when any) as rollout `rollout + 1`, counts it, saves a checkpoint when
  // train.save_every says or at the last rollout, and on a stop request saves and throws Interrupted.
  void end_rollout(const MetricValues& values, const DataCursor& prompt_cursor);
  // After the last rollout: a checkpoint if the last one was not saved, metrics closed.
  void end(const DataCursor& prompt_cursor);
  // final/ and final_<folder>/ for the other models, the closing lines (peak device bytes per
  // phase, what was left out or skipped) and result.json: rollouts, optimizer steps, dropped and
  // skipped counts, peaks, the evaluations before (state.first_eval) and after, plus `extra`.
  void finish(const nlohmann::json& last_eval, int64_t optimizer_steps, nlohmann::json extra);

  // The run's processes (null for one).
  dist::Communicator* communicator() const { return lifecycle_.communicator(); }

  RlRunState state;
  int64_t rollout = 0;      // rollouts done
  DataCursor prompt_cursor;  // where the prompt order resumes
  PhasePeaks peaks;          // the engine's peak device bytes per phase
  int64_t dropped_rows = 0;  // responses left out (non-finite), over the run
  int64_t skipped_steps = 0; // optimizer steps skipped (non-finite gradients)

 private:
  void save(const DataCursor& prompt_cursor);

  const Config& config_;
  offload::ParameterEngine& engine_;
  std::string command_;
  std::function<void(RlRunState&)> before_save_;
  RunLifecycle lifecycle_;
  int64_t total_ = 0, last_save_ = -1;
  std::optional<int64_t> resume_step_;
  std::unique_ptr<MetricsLogger> metrics_;
  std::unique_ptr<StopSignal> stop_;
  std::unique_ptr<offload::ActivationMeter> meter_;
};

}  // namespace ferry::rl
