// How a trainer-driven stage (SFT, RM, DPO) ends: the run's length and memory printed, the
// trainer run, final/ rewritten for LoRA, the figures printed and written to result.json.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "core/config/config.h"
#include "offload/engine_fwd.h"
#include "train/trainer.h"

namespace ferry {

// The end every stage shares: prints the run's length ("<stage>: 250 steps of 16 x 1 <unit>") and
// the engine's memory, runs the trainer, throws Interrupted when a signal stopped it (its
// checkpoint is saved), rewrites final/ for LoRA (export_lora_final), and prints the last loss,
// the evaluation's loss and its `eval_values`, and the engine's peak bytes per tier; writes
// result.json with those figures.
TrainResult run_to_the_end(Trainer& trainer, const Config& config, const offload::ParameterEngine& engine, c10::Device device,
                           const std::string& stage, const std::string& unit,
                           const std::vector<std::string>& eval_values = {});

}  // namespace ferry
