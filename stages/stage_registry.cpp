// The stage table and the common start of every stage run.
#include "stages/stage_registry.h"

#include <filesystem>

#include "core/config/config_io.h"
#include "core/error.h"
#include "src/dist/communicator.h"
#include "src/io/model_path.h"
#include "stages/distill.h"
#include "stages/dpo.h"
#include "stages/grpo.h"
#include "stages/kto.h"
#include "stages/ppo.h"
#include "stages/rm.h"
#include "stages/sft.h"
#include "train/stage_result.h"

namespace ferry {

const std::vector<StageInfo>& all_stages() {
  static const std::vector<StageInfo> stages{
      {Stage::sft, "train-sft", "supervised fine-tuning", run_sft, true},
      {Stage::rm, "train-rm", "reward-model training", run_rm, true},
      {Stage::dpo, "train-dpo", "direct preference optimisation", run_dpo, true},
      {Stage::kto, "train-kto", "KTO (Kahneman-Tversky optimisation) from unpaired examples", run_kto, true},
      {Stage::distill, "train-distill", "on-policy distillation (GKD) from a paged teacher", run_distill, true},
      {Stage::ppo, "train-ppo", "PPO from a reward model", run_ppo, false},
      {Stage::grpo, "train-grpo", "GRPO (group-relative policy optimisation)", run_grpo, false},
  };
  return stages;
}

const StageInfo& stage_info(Stage stage) {
  for (const auto& info : all_stages()) {
    if (info.stage == stage) return info;
  }
  throw InternalError("no stage table entry for stage '" + std::string(enum_name(stage)) + "'");
}

void check_stage_matches(const Config& config, Stage stage, const std::string& config_path) {
  if (config.stage == Stage::any || config.stage == stage) return;
  throw ConfigError(config_path + ": this file is for stage '" + std::string(enum_name(config.stage)) +
                    "' (its `stage:` key) but was given to `ferry " + stage_info(stage).command +
                    "`; use `ferry " + stage_info(config.stage).command + "` or fix `stage:`");
}

namespace {

// The config a stage runs with: model paths that name a GGUF file or an Ollama model replaced by
// the folders prepared for them (src/io/model_path.h). The saved config keeps what the user wrote.
Config with_model_folders(const Config& config) {
  Config resolved = config;
  for (std::string* path : {&resolved.model.path, &resolved.dpo.reference_model, &resolved.kto.reference_model,
                            &resolved.distill.teacher_model}) {
    if (!path->empty()) *path = io::resolve_model_path(*path).string();
  }
  return resolved;
}

}  // namespace

void run_stage(Stage stage, const Config& config) {
  const StageInfo& info = stage_info(stage);
  FERRY_CHECK(info.run != nullptr, "no run function for stage ", info.command);
  if (!info.diloco && config.distributed.mode == DistributedMode::diloco && dist::read_dist_env().distributed()) {
    throw ConfigError(std::string("distributed.mode: ") + info.command +
                      " runs data-parallel with a synchronous step only (its rollouts are shared by every process); "
                      "set distributed.mode=sync");
  }
  if (dist::is_primary_process()) {  // in a data-parallel run rank 0 writes the run's files
    std::filesystem::create_directories(config.output.dir);
    std::filesystem::remove(std::filesystem::path(config.output.dir) / kStageResultFile);  // written again at the end
    save_resolved_config(config, config.output.dir);
  }
  info.run(with_model_folders(config));
}

}  // namespace ferry
