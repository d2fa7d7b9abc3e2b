// The run around an RL stage's rollouts (see rl_run_lifecycle.h).
#include "train/rl/rl_run_lifecycle.h"

#include <iostream>

#include "core/error.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "src/metrics/metrics_logger.h"
#include "train/checkpoint_folders.h"
#include "train/stage_result.h"
#include "train/stop_signal.h"
#include "train/trainer_state.h"

namespace fs = std::filesystem;

namespace ferry::rl {

RlRunLifecycle::RlRunLifecycle(const Config& config, offload::ParameterEngine& engine, std::string command,
                               std::vector<CheckpointedModel> models, std::function<void(RlRunState&)> before_save)
    : config_(config),
      engine_(engine),
      command_(std::move(command)),
      before_save_(std::move(before_save)),
      lifecycle_(config, engine, std::move(models), std::cout) {}

RlRunLifecycle::~RlRunLifecycle() = default;

bool RlRunLifecycle::resume(int64_t total_rollouts) {
  total_ = total_rollouts;
  const std::optional<RunLifecycle::Resumed> resumed = lifecycle_.resume();
  if (!resumed) return false;
  state = load_rl_run_state(resumed->folder);
  rollout = resumed->trainer.step;
  prompt_cursor = resumed->trainer.cursor;
  resume_step_ = rollout;
  std::cout << "resumed from " << resumed->folder.string() << " at rollout " << rollout << " of " << total_ << "\n";
  return true;
}

void RlRunLifecycle::start() {
  meter_ = engine_.meter_activations();
  MetricsLoggerOptions options;
  options.total_steps = total_;
  options.resume_step = resume_step_;
  metrics_ = std::make_unique<MetricsLogger>(logging_for_process(config_.logging, lifecycle_.primary()), lifecycle_.output(), options);
  stop_ = std::make_unique<StopSignal>();
}

void RlRunLifecycle::save(const DataCursor& cursor) {
  TrainerState trainer;
  trainer.step = rollout;
  trainer.total_steps = total_;
  trainer.cursor = cursor;
  trainer.seed = config_.train.seed;
  if (before_save_) before_save_(state);
  lifecycle_.save(trainer, [&](const fs::path& folder) { save_rl_run_state(folder, state); });
  last_save_ = rollout;
}

void RlRunLifecycle::end_rollout(const MetricValues& values, const DataCursor& cursor) {
  FERRY_CHECK(metrics_ != nullptr, "RlRunLifecycle::start was not called");
  ++rollout;
  MetricValues logged = values;
  if (dropped_rows > 0) logged.push_back({"dropped_responses", static_cast<double>(dropped_rows)});
  metrics_->log_train(rollout, logged);
  const bool stopping = stop_->requested_by_any(lifecycle_.communicator());  // a signal to any process stops them all
  if ((config_.train.save_every > 0 && rollout % config_.train.save_every == 0) || rollout == total_ || stopping) {
    save(cursor);
  }
  if (stopping) {
    metrics_->close();
    throw Interrupted(stop_->reported_signal(),
                      detail::concat(command_, ": interrupted after rollout ", rollout, "; checkpoint ",
                                     checkpoint_folder(lifecycle_.output(), rollout).string(),
                                     " saved; resume with --set train.resume=auto"));
  }
}

void RlRunLifecycle::end(const DataCursor& cursor) {
  if (last_save_ != rollout && rollout > 0) save(cursor);
  if (metrics_) metrics_->close();
  meter_.reset();
}

void RlRunLifecycle::finish(const nlohmann::json& last_eval, int64_t optimizer_steps, nlohmann::json extra) {
  lifecycle_.write_final(/*export_lora=*/true);
  if (lifecycle_.several()) lifecycle_.communicator()->barrier();  // final/ is written before any process moves on
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

}  // namespace ferry::rl
