// Supervised fine-tuning (`ferry train-sft`): a causal LM learns the assistant turns of
// conversations. Loss: mean cross-entropy over label tokens (assistant content and its
// end-of-assistant marker), shifted by one as transformers' causal-LM loss, averaged over all
// label tokens of an optimizer step. The loop, precision and checkpoints are src/train's; this
// file only supplies the data and the loss. With lora.rank > 0 only LoRA adapters train (see
// prepare_lora and export_lora_final).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "src/config/config.h"
#include "src/data/sft_dataset.h"
#include "src/model/llama_heads.h"
#include "src/train/indexed_batch_source.h"
#include "stages/stage_common.h"
#include "src/train/trainer.h"
#include "src/train/training_task.h"

namespace ferry {

// Batches of tokenised conversations in seeded epoch order: right-padded rows of
// micro_batch_size samples, or with `packing` about micro_batch_size rows of max_length tokens
// (a fixed number of samples per micro-batch, micro_batch_size * max(1, max_length / mean sample
// length), so the cursor stays a sample count and resume is exact).
class SftBatchSource : public IndexedBatchSource {
 public:
  struct Options {
    int64_t micro_batch_size = 4;
    int64_t pad_id = 0;
    uint64_t seed = 0;
    bool shuffle = true;
    bool packing = false;
    int64_t max_length = 512;
  };
  SftBatchSource(std::vector<TokenizedSample> train, std::vector<TokenizedSample> eval, const Options& options);

  int64_t samples_per_batch() const { return samples_per_batch_; }

  // Tensors of a micro-batch from samples (input_ids, attention_mask, position_ids, labels).
  MicroBatch collate_samples(const std::vector<const TokenizedSample*>& samples) const;

 protected:
  MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const override;

 private:
  std::vector<TokenizedSample> train_, eval_;
  Options options_;
  int64_t samples_per_batch_ = 1;
};

// Summed causal-LM cross-entropy over label tokens; loss_weight of a batch is its label count.
class SftObjective : public TrainingObjective {
 public:
  SftObjective(std::string model_name, LlamaForCausalLMImpl& model) : name_(std::move(model_name)), model_(model) {}
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

 private:
  std::string name_;
  LlamaForCausalLMImpl& model_;
};

// The batch's input_ids, attention_mask, position_ids and labels (B, T) with kIgnoreLabel where no
// loss is taken; position t predicts labels[t + 1]. Returns the fp32 sum of -log p(label) over the
// labelled positions, through the runner's (chunked) LM head.
torch::Tensor causal_lm_loss_sum(BackboneRunner& runner, const std::string& model, LlamaForCausalLMImpl& lm,
                                 const MicroBatch& batch);

// Label tokens that count after the shift: labels[:, 1:] != kIgnoreLabel.
int64_t shifted_label_count(const torch::Tensor& labels);

// The whole stage: model, tokenizer, data, engine, trainer (output.dir is prepared by run_stage).
void run_sft(const Config& config);

}  // namespace ferry
