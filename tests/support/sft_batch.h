// An SFT micro-batch from a Python reference's tensors (input_ids, attention_mask, position_ids,
// labels), weighted by its label count as the trainer weights it: what the SFT / LoRA / QLoRA /
// family training parity tests feed Ferry's SFT loss.
#pragma once

#include "src/io/safetensors.h"
#include "train/causal_lm_loss.h"
#include "train/training_task.h"

namespace ferry::test_support {

inline MicroBatch sft_batch_from(const io::TensorMap& tensors) {
  MicroBatch batch;
  for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels"}) batch.tensors[name] = tensors.at(name);
  batch.loss_weight = shifted_label_count(tensors.at("labels"));
  return batch;
}

}  // namespace ferry::test_support
