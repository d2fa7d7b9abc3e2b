// The run around an RL stage's rollouts (see rl_run.h).
#include "stages/rl_run.h"

#include <iostream>

#include "offload/engine.h"
#include "src/core/error.h"
#include "src/core/file_util.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_logger.h"
#include "src/train/checkpoint_folders.h"
#include "src/train/collective_checkpoint.h"
#include "src/train/stop_signal.h"
#include "src/train/trainer_state.h"
#include "stages/stage_common.h"

namespace fs = std::filesystem;

namespace ferry {

RlRun::RlRun(const Config& config, ParameterEngine& engine, std::string command, std::vector<RlTrainedModel> models,
             std::function<void(PpoState&)> before_save)
    : config_(config),
      engine_(engine),
      command_(std::move(command)),
      models_(std::move(models)),
      before_save_(std::move(before_save)),
      output_(config.output.dir),
      comm_(dist::process_communicator(config.distributed)) {
  FERRY_CHECK(!models_.empty(), "an RL run without a policy");
}

RlRun::~RlRun() = default;

bool RlRun::resume(int64_t total_rollouts) {
  total_ = total_rollouts;
  const auto folder = resolve_resume(output_, config_.train.resume, std::cout);
  if (!folder) return false;
  const TrainerState trainer = load_trainer_state(*folder);
  state = load_ppo_state(*folder);
  for (const RlTrainedModel& m : models_) {
    engine_.with_weights(m.io.name, ParameterEngine::WeightAccess::write, [&] { m.io.load(*folder / m.folder); });
  }
  engine_.load_state(*folder);
  restore_rng_state(*folder);
  rollout = trainer.step;
  prompt_cursor = trainer.cursor;
  resume_step_ = rollout;
  std::cout << "resumed from " << folder->string() << " at rollout " << rollout << " of " << total_ << "\n";
  return true;
}

void RlRun::start() {
  meter_ = engine_.meter_activations();
  MetricsLoggerOptions options;
  options.total_steps = total_;
  options.resume_step = resume_step_;
  metrics_ = std::make_unique<MetricsLogger>(logging_for_process(config_.logging, primary()), output_, options);
  stop_ = std::make_unique<StopSignal>();
}

void RlRun::save(const DataCursor& cursor) {
  TrainerState trainer;
  trainer.step = rollout;
  trainer.total_steps = total_;
  trainer.cursor = cursor;
  trainer.seed = config_.train.seed;
  if (before_save_) before_save_(state);
  const offload::ActivationMeter::Pause host_work;  // copies for the files are not device memory
  CheckpointWriters writers;
  writers.primary = [&](const fs::path& folder) {
    for (const RlTrainedModel& m : models_) {
      engine_.with_weights(m.io.name, ParameterEngine::WeightAccess::read, [&] { m.io.save(folder / m.folder); });
    }
    engine_.save_state(folder);
    save_trainer_state(folder, trainer);
    save_ppo_state(folder, state);
  };
  // ZeRO (distributed.zero_stage >= 1): every process writes the optimizer state it owns.
  if (several() && config_.distributed.zero_stage >= 1) writers.own = [&](const fs::path& staging) { engine_.save_state(staging); };
  if (sharded_weights()) writers.join = [&] { join_weight_gathers(); };
  write_checkpoint_collective(comm_, output_, rollout, config_.output.keep_last, writers);
  last_save_ = rollout;
}

void RlRun::end_rollout(const MetricValues& values, const DataCursor& cursor) {
  FERRY_CHECK(metrics_ != nullptr, "RlRun::start was not called");
  ++rollout;
  MetricValues logged = values;
  if (dropped_rows > 0) logged.push_back({"dropped_responses", static_cast<double>(dropped_rows)});
  metrics_->log_train(rollout, logged);
  const bool stopping = stop_->requested_by_any(comm_);  // a signal to any process stops them all
  if ((config_.train.save_every > 0 && rollout % config_.train.save_every == 0) || rollout == total_ || stopping) {
    save(cursor);
  }
  if (stopping) {
    metrics_->close();
    throw Interrupted(stop_->reported_signal(),
                      detail::concat(command_, ": interrupted after rollout ", rollout, "; checkpoint ",
                                     checkpoint_folder(output_, rollout).string(),
                                     " saved; resume with --set train.resume=auto"));
  }
}

void RlRun::end(const DataCursor& cursor) {
  if (last_save_ != rollout && rollout > 0) save(cursor);
  if (metrics_) metrics_->close();
  meter_.reset();
}

fs::path RlRun::save_final() {
  const fs::path final_dir = output_ / "final";
  if (!primary()) {  // rank 0 writes; under ZeRO 3 every process joins its weight gathers
    if (sharded_weights()) join_weight_gathers();
    return final_dir;
  }
  const RlTrainedModel& policy = models_.front();
  write_folder_atomic(final_dir, [&](const fs::path& folder) {
    engine_.with_weights(policy.io.name, ParameterEngine::WeightAccess::read, [&] { policy.io.save(folder); });
  });
  export_lora_final(final_dir, config_);
  std::cout << "final model: " << final_dir.string();
  for (size_t i = 1; i < models_.size(); ++i) {
    const fs::path dir = output_ / ("final_" + models_[i].folder);
    write_folder_atomic(dir, [&](const fs::path& folder) {
      engine_.with_weights(models_[i].io.name, ParameterEngine::WeightAccess::read, [&] { models_[i].io.save(folder); });
    });
    std::cout << " (" << models_[i].folder << ": " << dir.string() << ")";
  }
  std::cout << "\n";
  return final_dir;
}

bool RlRun::primary() const { return comm_ == nullptr || comm_->rank() == 0; }

bool RlRun::several() const { return comm_ != nullptr && comm_->size() > 1; }

bool RlRun::sharded_weights() const { return several() && config_.distributed.zero_stage >= 3; }

void RlRun::join_weight_gathers() {
  for (const RlTrainedModel& m : models_) engine_.with_weights(m.io.name, ParameterEngine::WeightAccess::read, [] {});
}

void RlRun::finish(const nlohmann::json& last_eval, int64_t optimizer_steps, nlohmann::json extra) {
  save_final();
  if (several()) comm_->barrier();  // final/ is written before any process moves on
  std::cout << peaks.summary(command_, config_.offload.gpu_memory.bytes) << "\n";
  if (dropped_rows > 0 || skipped_steps > 0) {
    std::cout << command_ << ": " << dropped_rows << " responses left out (non-finite), " << skipped_steps
              << " optimizer steps skipped (non-finite gradients)\n";
  }
  nlohmann::json figures{{"rollouts", rollout},
                         {"optimizer_steps", optimizer_steps},
                         {"dropped_responses", dropped_rows},
                         {"skipped_steps", skipped_steps},
                         {"peak_device_bytes", peaks.json()}};
  if (extra.is_object()) figures.update(extra);
  if (!state.first_eval.is_null()) figures["eval_before"] = state.first_eval;
  if (!last_eval.is_null()) figures["eval_after"] = last_eval;
  write_stage_result(config_, figures.dump());
}

}  // namespace ferry
