// On-policy distillation (`ferry train-distill`), as TRL 1.16's GKDTrainer: a student (model.path or
// model.config) learns to match a frozen teacher's next-token distributions (distill.teacher_model),
// token by token, through the generalised Jensen-Shannon divergence of train/gkd_loss.h. With
// probability distill.lmbda a micro-batch's answers are the student's own, sampled from its
// prompts (generation.*); the others are data.train_file's answers ({"messages": [...]}, as SFT).
//
// Teacher and student are held in one parameter engine, so a teacher larger than the GPU's room
// left beside the student still runs: each phase names what it needs (make_resident) — student
// generation {student}; scoring and learning {} (the teacher's forward without gradients, then the
// student's with them, each paged group by group as offload.policy says). The teacher's
// log-probabilities of the micro-batch's answer tokens (tokens x vocabulary, fp32) are held between
// the two forwards. Teacher and student must share a tokenizer (vocabulary size and tokenizer file).
//
// The on-policy draw and each row's sampling generator are functions of train.seed and the
// micro-batch's ids, so a resumed run repeats them. Evaluation (data.eval_file) takes the dataset's
// answers. final/ is the student, as train-sft writes it.
#pragma once

#include <string>

#include "core/config/config.h"
#include "src/generate/generate.h"
#include "src/model/model_heads.h"
#include "train/training_task.h"

namespace ferry {

namespace offload {
class ParameterEngine;
}

// Each micro-batch's mean divergence over its answer tokens (loss_weight 1: the step's loss is the
// mean over its micro-batches). Extra values: on_policy (the share of micro-batches whose answers
// the student sampled) and answer_tokens.
class DistillObjective : public TrainingObjective {
 public:
  DistillObjective(const DistillConfig& settings, offload::ParameterEngine& engine, std::string student_name,
                   CausalLMImpl& student, std::string teacher_name, CausalLMImpl& teacher,
                   GenerateOptions generation, int64_t pad_id, uint64_t seed);
  LossSum loss(const MicroBatch& batch, BackboneRunner& runner) override;

  // The micro-batch with the student's own answers to its prompts (the ids before each row's first
  // label), labels on the answers.
  MicroBatch on_policy_batch(const MicroBatch& batch);
  // Whether `batch` (a training micro-batch) takes the student's answers: a draw below lmbda.
  bool draws_on_policy(const MicroBatch& batch) const;

 private:
  DistillConfig settings_;
  offload::ParameterEngine& engine_;
  std::string student_name_, teacher_name_;
  CausalLMImpl& student_;
  CausalLMImpl& teacher_;
  GenerateOptions generation_;
  int64_t pad_id_;
  uint64_t seed_;
};

// Throws ConfigError when the teacher's vocabulary or tokenizer differs from the student's.
void check_same_tokenizer(const ModelShape& student, const std::string& student_tokenizer, const ModelShape& teacher,
                          const std::string& teacher_folder);

void run_distill(const Config& config);

}  // namespace ferry
