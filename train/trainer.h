// Trainer: the one training loop every stage uses. It owns precision (loss scaling for fp16),
// gradient accumulation, global-norm clipping, the LR schedule, evaluation every N steps, the stop
// condition (train.max_steps or train.epochs), SIGINT/SIGTERM handling, metrics and checkpoints:
//
//   output.dir/step-N/   the model as a Hugging Face folder (TrainedModel::save) + the engine's
//                        optimizer state + trainer_state.json + rng_state.safetensors, written
//                        atomically (write_folder_atomic); older ones pruned to output.keep_last
//   output.dir/final/    the model as a Hugging Face folder (with tokenizer.model), at the end
//
// train.resume (auto | PATH) continues exactly: the same losses and weights as a run that never
// stopped. A stage supplies the data (BatchSource), the loss (TrainingObjective), the engine
// holding its models, and how to save/load the trained model (TrainedModel).
//
// One optimizer step:
//   engine.zero_grad()
//   take grad_accumulation micro-batches; W = sum of their loss weights
//   for each: loss_sum = objective.loss(batch); backward(loss_sum * scale / W)
//             (the objective's extra values, summed over units too, are logged divided by W)
//   then train/optimizer_step.h's step, the RL learners' too: norm = engine.gradient_norm() / scale;
//   fp16: skip the step on inf/NaN (LossScaler); clip = min(1, max_grad_norm / (norm + 1e-6));
//   engine.step(lr(step), clip / scale)
// Resume, checkpoints and final/ are train/run_lifecycle.h's, shared with the RL run.
//
// Data parallel (torchrun or `ferry launch`, src/dist): every process reads the same micro-batches
// in the same order, grad_accumulation × WORLD_SIZE per step, and runs backward on every
// WORLD_SIZE-th one from its RANK; W is the sum over all of them, so after the engine's gradients
// are summed over the processes (engine.reduce_gradients) every process takes the step a single
// process with grad_accumulation × WORLD_SIZE would take. Losses are summed the same way; rank 0
// alone writes metrics, checkpoints and final/ (checkpoints resume at any process count with the
// same global batch). Evaluation is shared out the same way: every WORLD_SIZE-th eval batch.
// With distributed.zero_stage >= 1 the engine shards the optimizer state (EngineOptions), and
// each process writes its shard of it into the checkpoint rank 0 completes. With
// distributed.mode diloco (train/diloco.h) the gradients are not summed: each process steps on
// its own micro-batches (W is then the sum over its own), and every distributed.inner_steps steps
// (and at the last) the processes take DiLoCo's outer step together; checkpoints and evaluations
// fall on those steps, and each process's inner optimizer state goes into the checkpoint
// (diloco-rank-R/ beside rank 0's). Data-parallel steps log `comm_bytes`: the bytes this process
// handed to collectives in the step (Communicator::payload_bytes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "core/config/config.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_logger.h"
#include "train/loss_scaler.h"
#include "train/run_lifecycle.h"
#include "train/training_task.h"

namespace ferry {

class DiLoCo;  // train/diloco.h

// The mean loss over the evaluation set, and the objective's extra values (LossSum::extra) as
// means over the same units.
struct Evaluation {
  double loss = 0.0;
  MetricValues extra;
};

struct TrainResult {
  int64_t steps = 0;             // optimizer steps completed in total
  int stop_signal = 0;           // SIGINT/SIGTERM that stopped the run after saving a checkpoint; 0: none
  double last_loss = 0.0;        // training loss of the last step
  MetricValues last_extra;       // the objective's extra values of the last step (means over units)
  std::optional<double> eval_loss;  // of the last evaluation
  MetricValues eval_extra;       // the objective's extra values of the last evaluation
  int64_t skipped_steps = 0;     // steps skipped for non-finite gradients
  std::filesystem::path final_dir;  // empty when interrupted

  bool interrupted() const { return stop_signal != 0; }
};

class Trainer {
 public:
  // Uses config.train, config.output and config.logging. `console` receives run messages
  // (resume, evaluation, checkpoints); metrics_options lets tests inject the metrics console.
  Trainer(const Config& config, offload::ParameterEngine& engine, BatchSource& data, TrainingObjective& objective,
          TrainedModel model, std::ostream* console = nullptr, MetricsLoggerOptions metrics_options = {});
  ~Trainer();

  // Runs to the end (or a stop signal). Throws what the parts throw; checkpoints already written
  // stay valid.
  TrainResult run();

  // Mean loss and extra values over data.eval_batches() (nullopt when there are none), without
  // gradients.
  std::optional<Evaluation> evaluate();

  // Optimizer steps of the whole run: train.max_steps, or train.epochs passes over the data.
  int64_t total_steps() const;

  // Called with every step's training loss (tests compare runs with it).
  std::function<void(int64_t step, double loss)> on_step;

 private:
  // evaluate(), logged as eval values of `step` and kept in `result`.
  void evaluate_into(TrainResult& result, MetricsLogger& metrics, int64_t step);
  void save_checkpoint(int64_t step, int64_t total, const LossScaler& scaler);

  int64_t micro_batches_per_step() const;  // grad_accumulation on every process together
  // distributed.zero_stage 3 over several processes: the engine's page-ins and with_weights are
  // collective, so every process makes them, rank 0 alone writing.
  bool sharded_weights() const;

  const Config& config_;
  offload::ParameterEngine& engine_;
  BatchSource& data_;
  TrainingObjective& objective_;
  TrainedModel model_;
  std::ostream& console_;
  MetricsLoggerOptions metrics_options_;
  dist::Communicator* comm_ = nullptr;  // data-parallel runs (src/dist); null for one process
  RunLifecycle lifecycle_;              // resume, checkpoints, final/
  std::unique_ptr<DiLoCo> diloco_;      // distributed.mode diloco over several processes
};

}  // namespace ferry
