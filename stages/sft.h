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
#include "src/train/trainer.h"
#include "src/train/training_task.h"

namespace ferry {

// Batches of tokenised conversations in seeded epoch order: right-padded rows of
// micro_batch_size samples, or with `packing` about micro_batch_size rows of max_length tokens
// (a fixed number of samples per micro-batch, micro_batch_size * max(1, max_length / mean sample
// length), so the cursor stays a sample count and resume is exact).
class SftBatchSource : public BatchSource {
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

  int64_t batches_per_epoch() const override;
  MicroBatch next_train_batch() override;
  DataCursor cursor() const override;
  void restore(const DataCursor& cursor) override;
  std::vector<MicroBatch> eval_batches() const override;

  int64_t samples_per_batch() const { return samples_per_batch_; }

  // Tensors of a micro-batch from samples (input_ids, attention_mask, position_ids, labels).
  MicroBatch collate(const std::vector<const TokenizedSample*>& samples) const;

 private:
  std::vector<TokenizedSample> train_, eval_;
  Options options_;
  int64_t samples_per_batch_ = 1;
  std::optional<EpochSampler> sampler_;
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

// logits: (B, T, V), labels: (B, T) with kIgnoreLabel where no loss is taken. Position t predicts
// labels[t + 1]. Returns the fp32 sum of -log p(label) over the labelled positions.
torch::Tensor causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels);

// Label tokens that count after the shift: labels[:, 1:] != kIgnoreLabel.
int64_t shifted_label_count(const torch::Tensor& labels);

// With lora.rank > 0: attaches adapters to `model` (src/model/lora.h, A drawn from train.seed) and
// freezes its base weights, so the engine keeps optimizer state for the adapters only.
void prepare_lora(LlamaForCausalLMImpl& model, const Config& config);

// How train-sft saves and resumes its model. save: config.json + weights (with LoRA: base weights
// and adapters together, plus adapter_config.json, which makes step-N exact to resume and lets
// `ferry export` merge it or cut the adapter out) + tokenizer.model when `tokenizer_file` is set.
// load: the weights of such a folder into the live model.
TrainedModel sft_trained_model(const std::string& name, LlamaForCausalLMImpl& model, const LlamaConfig& shape,
                               const Config& config, const std::string& tokenizer_file);

// With LoRA, rewrites output.dir/final (saved by the trainer as a checkpoint) in lora.export's
// format, through `ferry export`'s code: `merged` a plain Hugging Face folder, `adapter` a PEFT
// adapter folder (adapter_config.json + adapter_model.safetensors + tokenizer.model).
void export_lora_final(const std::filesystem::path& final_dir, const Config& config);

// The whole stage: model, tokenizer, data, engine, trainer (output.dir is prepared by run_stage).
void run_sft(const Config& config);

}  // namespace ferry
