// Resume, checkpoints and final folders of a training run (see run_lifecycle.h).
#include "train/run_lifecycle.h"

#include "core/error.h"
#include "offload/activation_meter.h"
#include "offload/engine.h"
#include "src/dist/communicator.h"
#include "train/checkpoint_folders.h"
#include "train/collective_checkpoint.h"
#include "train/model_setup.h"

namespace fs = std::filesystem;

namespace ferry {

namespace {

// Where a checkpoint keeps a model: its subfolder, or the checkpoint itself.
fs::path model_folder(const fs::path& checkpoint, const CheckpointedModel& model) {
  return model.folder.empty() ? checkpoint : checkpoint / model.folder;
}

// Writes a model's Hugging Face folder from the engine's current weights.
void save_model(offload::ParameterEngine& engine, const CheckpointedModel& model, const fs::path& folder) {
  engine.with_weights(model.io.name, offload::ParameterEngine::WeightAccess::read, [&] { model.io.save(folder); });
}

}  // namespace

RunLifecycle::RunLifecycle(const Config& config, offload::ParameterEngine& engine, std::vector<CheckpointedModel> models,
                           std::ostream& console)
    : config_(config),
      engine_(engine),
      models_(std::move(models)),
      console_(console),
      output_(config.output.dir),
      comm_(dist::process_communicator(config.distributed)) {
  FERRY_CHECK(!models_.empty(), "a run without a trained model");
}

std::optional<RunLifecycle::Resumed> RunLifecycle::resume(
    const std::function<fs::path(const fs::path&)>& optimizer_state_dir) {
  const std::optional<fs::path> folder = resolve_resume(output_, config_.train.resume, console_);
  if (!folder) return std::nullopt;
  Resumed resumed{*folder, load_trainer_state(*folder)};
  for (const CheckpointedModel& m : models_) {
    engine_.with_weights(m.io.name, offload::ParameterEngine::WeightAccess::write, [&] { m.io.load(model_folder(*folder, m)); });
  }
  engine_.load_state(optimizer_state_dir ? optimizer_state_dir(*folder) : *folder);
  restore_rng_state(*folder);
  return resumed;
}

void RunLifecycle::save(const TrainerState& trainer, const FolderWriter& more, FolderWriter own) {
  const offload::ActivationMeter::Pause host_work;  // copies for the files are not device memory
  CheckpointWriters writers;
  writers.primary = [&](const fs::path& folder) {
    for (const CheckpointedModel& m : models_) save_model(engine_, m, model_folder(folder, m));
    engine_.save_state(folder);
    if (more) more(folder);
    save_trainer_state(folder, trainer);
  };
  // ZeRO (distributed.zero_stage >= 1): every process writes the optimizer state it owns.
  if (!own && several() && config_.distributed.zero_stage >= 1) {
    own = [&](const fs::path& staging) { engine_.save_state(staging); };
  }
  writers.own = std::move(own);
  if (sharded_weights()) writers.join = [&] { join_weight_gathers(); };
  write_checkpoint_collective(comm_, output_, trainer.step, config_.output.keep_last, writers);
}

fs::path RunLifecycle::write_final(bool export_lora) {
  const fs::path final_dir = output_ / "final";
  if (!primary()) {  // rank 0 writes; under ZeRO 3 every process joins its weight gathers
    if (sharded_weights()) join_weight_gathers();
    return final_dir;
  }
  const offload::ActivationMeter::Pause host_work;
  const CheckpointedModel& first = models_.front();
  write_folder_atomic(final_dir, [&](const fs::path& folder) { save_model(engine_, first, folder); });
  if (export_lora) export_lora_final(final_dir, config_);
  console_ << "final model: " << final_dir.string();
  for (size_t i = 1; i < models_.size(); ++i) {
    const CheckpointedModel& m = models_[i];
    const fs::path dir = output_ / ("final_" + m.folder);
    write_folder_atomic(dir, [&](const fs::path& folder) { save_model(engine_, m, folder); });
    console_ << " (" << m.folder << ": " << dir.string() << ")";
  }
  console_ << "\n";
  return final_dir;
}

bool RunLifecycle::primary() const { return comm_ == nullptr || comm_->rank() == 0; }

bool RunLifecycle::several() const { return comm_ != nullptr && comm_->size() > 1; }

bool RunLifecycle::sharded_weights() const { return several() && config_.distributed.zero_stage >= 3; }

void RunLifecycle::join_weight_gathers() {
  for (const CheckpointedModel& m : models_) engine_.with_weights(m.io.name, offload::ParameterEngine::WeightAccess::read, [] {});
}

}  // namespace ferry
