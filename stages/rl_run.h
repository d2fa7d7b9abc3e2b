// An RL stage's run around its rollouts, the same for PPO and GRPO: resuming from output.dir
// (train.resume), the metrics logger, checkpoints step-N/ (N rollouts: a Hugging Face folder per
// trained model, the engine's optimizer state, trainer_state.json with the prompt cursor, the
// random generators, ppo_state.json), SIGINT/SIGTERM (finish the rollout, save, exit saying how to
// resume), and the final folders: final/ for the policy (LoRA as lora.export says), final_<name>/
// for any other trained model (PPO's critic). In a data-parallel run rank 0 logs and writes; every
// process writes its optimizer-state shard under ZeRO, a signal to any process stops them all.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/config/config.h"
#include "src/data/epoch_order.h"
#include "src/metrics/metrics_row.h"
#include "src/train/trainer.h"
#include "stages/ppo_state.h"
#include "stages/rl_stage.h"

namespace ferry {

namespace dist {
class Communicator;
}
class MetricsLogger;
class ParameterEngine;
class StopSignal;

// A trained model and the folder it has in a checkpoint ("policy", "critic").
struct RlTrainedModel {
  TrainedModel io;
  std::string folder;
};

class RlRun {
 public:
  // `models[0]` is the policy. `before_save` copies what the stage keeps (KL coefficient, optimizer
  // steps, cursors) into `state` before each checkpoint.
  RlRun(const Config& config, ParameterEngine& engine, std::string command, std::vector<RlTrainedModel> models,
        std::function<void(PpoState&)> before_save);
  ~RlRun();

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

  PpoState state;
  int64_t rollout = 0;      // rollouts done
  DataCursor prompt_cursor;  // where the prompt order resumes
  PhasePeaks peaks;          // the engine's peak device bytes per phase
  int64_t dropped_rows = 0;  // responses left out (non-finite), over the run
  int64_t skipped_steps = 0; // optimizer steps skipped (non-finite gradients)

 private:
  void save(const DataCursor& prompt_cursor);
  std::filesystem::path save_final();
  bool primary() const;          // rank 0, or the only process: writes logs, checkpoints and final/
  bool several() const;          // a data-parallel run
  bool sharded_weights() const;  // ZeRO 3 over several processes: with_weights is collective
  void join_weight_gathers();    // the with_weights calls of a save, on a process that writes nothing

  const Config& config_;
  ParameterEngine& engine_;
  std::string command_;
  std::vector<RlTrainedModel> models_;
  std::function<void(PpoState&)> before_save_;
  std::filesystem::path output_;
  int64_t total_ = 0, last_save_ = -1;
  std::optional<int64_t> resume_step_;
  std::unique_ptr<MetricsLogger> metrics_;
  std::unique_ptr<StopSignal> stop_;
  std::unique_ptr<offload::ActivationMeter> meter_;
  dist::Communicator* comm_ = nullptr;
};

}  // namespace ferry
