// What every training run does around its steps, the same for the trainer (SFT, RM, DPO) and the
// RL run (PPO, GRPO):
//   resume     train.resume's checkpoint: the trained models' weights, the engine's optimizer
//              state, the random generators, and trainer_state.json handed back to the caller
//   save       output.dir/step-N/: rank 0 writes the models, the engine's optimizer state,
//              trainer_state.json and what the caller adds; under ZeRO (distributed.zero_stage
//              >= 1) every process writes the optimizer state it owns (train/collective_checkpoint.h)
//   final      output.dir/final/ for the first model, final_<folder>/ for the others, by rank 0
// Under ZeRO 3 over several processes reading the weights is collective, so the processes that
// write nothing join those gathers. The caller keeps its loop, its stop signal and its metrics.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "train/trainer_state.h"
#include "train/training_task.h"

namespace ferry {

namespace dist {
class Communicator;
}

// How a run saves and loads the model it trains: its name in the engine, and a Hugging Face
// folder written and read back.
struct TrainedModel {
  std::string name;  // its name in the engine
  // Writes a Hugging Face folder (config.json, weights, tokenizer.model) into the given folder.
  std::function<void(const std::filesystem::path&)> save;
  // Loads the weights of a folder written by `save` into the live model.
  std::function<void(const std::filesystem::path&)> load;
};

// A trained model and its place in a checkpoint: `folder` under step-N/ ("policy", "critic"; ""
// the checkpoint folder itself).
struct CheckpointedModel {
  TrainedModel io;
  std::string folder;
};

class RunLifecycle {
 public:
  using FolderWriter = std::function<void(const std::filesystem::path&)>;

  // `models[0]` is the one final/ holds. `console` gets the closing "final model: ..." line.
  RunLifecycle(const Config& config, offload::ParameterEngine& engine, std::vector<CheckpointedModel> models,
               std::ostream& console);

  struct Resumed {
    std::filesystem::path folder;
    TrainerState trainer;
  };
  // train.resume (auto | PATH) resolved in output.dir; nullopt for a fresh start. Otherwise every
  // model's weights, the engine's optimizer state (from `optimizer_state_dir(folder)` when given:
  // DiLoCo's per-process replicas) and the random generators are restored.
  std::optional<Resumed> resume(const std::function<std::filesystem::path(const std::filesystem::path&)>&
                                    optimizer_state_dir = {});

  // step-N/ with N = trainer.step. `more` adds rank 0's other files; `own` replaces what the other
  // processes write into their staging folder (default: their optimizer-state shard under ZeRO).
  void save(const TrainerState& trainer, const FolderWriter& more = {}, FolderWriter own = {});

  // final/ (models[0]) and final_<folder>/ for the others, by rank 0; with `export_lora` final/ is
  // then rewritten as lora.export says (train/model_setup.h). Returns final/.
  std::filesystem::path write_final(bool export_lora);

  bool primary() const;          // rank 0, or the only process: writes logs, checkpoints and final/
  bool several() const;          // a data-parallel run
  bool sharded_weights() const;  // ZeRO 3 over several processes: with_weights is collective
  dist::Communicator* communicator() const { return comm_; }
  const std::filesystem::path& output() const { return output_; }

 private:
  void join_weight_gathers();  // the with_weights calls of a save, on a process that writes nothing

  const Config& config_;
  offload::ParameterEngine& engine_;
  std::vector<CheckpointedModel> models_;
  std::ostream& console_;
  std::filesystem::path output_;
  dist::Communicator* comm_ = nullptr;
};

}  // namespace ferry
