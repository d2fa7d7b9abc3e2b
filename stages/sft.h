// Supervised fine-tuning (`ferry train-sft`): a causal LM learns the assistant turns of
// conversations. Loss: mean cross-entropy over label tokens (assistant content and its
// end-of-assistant marker), shifted by one as transformers' causal-LM loss, averaged over all
// label tokens of an optimizer step. The loop, precision and checkpoints are train/'s; this
// file only supplies the data and the loss. With lora.rank > 0 only LoRA adapters train (see
// prepare_lora and export_lora_final).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "src/data/sft_dataset.h"
#include "src/model/model_heads.h"
#include "train/causal_lm_loss.h"
#include "train/model_setup.h"
#include "train/sft_batches.h"
#include "train/trainer.h"
#include "train/training_task.h"

namespace ferry {

// The whole stage: model, tokenizer, data, engine, trainer (output.dir is prepared by run_stage).
void run_sft(const Config& config);

}  // namespace ferry
