// `ferry train-kto`: unpaired examples, their KL rows and KTO's loss plugged into the shared loop.
#include "stages/kto.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/file_util.h"
#include "src/data/unpaired_dataset.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/model_setup.h"
#include "train/preference/kto_batches.h"
#include "train/preference/kto_loss.h"
#include "train/run_to_the_end.h"
#include "train/trainer.h"
#include "src/model/family/model_tensors.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

// Rows [start, start + count) of a micro-batch's row tensors.
MicroBatch rows_of(const MicroBatch& batch, int64_t start, int64_t count) {
  MicroBatch out;
  for (const char* name : {"input_ids", "attention_mask", "position_ids", "labels", "reference_logps"}) {
    if (batch.tensors.count(name)) out.tensors[name] = batch.at(name).narrow(0, start, count);
  }
  out.loss_weight = count;
  return out;
}

// The summed label log-probs of `rows` under the policy.
torch::Tensor policy_logps(BackboneRunner& runner, const std::string& name, CausalLMImpl& model,
                           const MicroBatch& rows) {
  return batch_logps(runner, name, model, rows, 0).labels.sum;
}

}  // namespace

KtoObjective::KtoObjective(const KtoConfig& settings, ReferenceSource source, std::string policy_name,
                           CausalLMImpl& policy, std::string reference_name, CausalLMImpl* reference)
    : settings_(settings), models_(source, std::move(policy_name), policy, std::move(reference_name), reference) {
  FERRY_CHECK(source != ReferenceSource::none, "kto always compares against a reference");
}

LossSum KtoObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  const int64_t b = batch.loss_weight;
  const bool kl_term = settings_.loss_type == KtoLoss::kto;
  const MicroBatch examples = rows_of(batch, 0, b);
  // What runs without gradients first, so that no autograd graph is alive meanwhile: the reference
  // (rows and, for the KL term, KL rows) and the policy's KL rows.
  const MicroBatch& scored = kl_term ? batch : examples;
  torch::Tensor reference = models_.reference_logps(scored, runner);  // (2B) or (B)
  KtoLogps logps;
  if (kl_term) {
    torch::NoGradGuard no_grad;
    logps.policy_kl = policy_logps(runner, models_.policy_name(), models_.policy(), rows_of(batch, b, b));
  }
  logps.policy = policy_logps(runner, models_.policy_name(), models_.policy(), examples);
  reference = reference.to(logps.policy.device(), torch::kFloat);
  logps.reference = reference.narrow(0, 0, b);
  if (kl_term) logps.reference_kl = reference.narrow(0, b, b);
  logps.desirable = batch.at("desirable");
  const KtoLosses losses = kto_losses(settings_, logps);
  return {losses.losses.sum(), kto_metrics(losses, logps)};
}

namespace {

nlohmann::json stats_json(const std::string& file, const UnpairedDatasetStats& s) {
  return {{"file", file},
          {"examples", s.examples()},
          {"desirable", s.desirable},
          {"undesirable", s.undesirable},
          {"from_pairs", s.from_pairs},
          {"truncated", s.truncated},
          {"skipped", {{"empty_completion", s.empty_completion},
                       {"no_room", s.no_room},
                       {"malformed_lines", s.jsonl.skipped}}}};
}

struct UnpairedSplit {
  std::vector<UnpairedExample> train, eval;
};

UnpairedSplit load_unpaired_split(const Config& config, const Tokenizer& tokenizer, const ChatTemplate& chat_template) {
  const DataConfig& d = config.data;
  if (d.train_file.empty()) {
    throw ConfigError("data.train_file: train-kto needs a jsonl of unpaired examples ({\"prompt\", \"completion\", "
                      "\"label\": true|false}) or of preference pairs ({\"prompt\", \"chosen\", \"rejected\"})");
  }
  UnpairedDataset train =
      load_unpaired_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, d.max_samples,
                            RowFormat::from_config(d));
  std::cout << "train-kto: " << d.train_file << ": " << train.stats.summary() << "\n";
  nlohmann::json stats{{"train", stats_json(d.train_file, train.stats)}};
  UnpairedSplit split{std::move(train.examples), {}};
  if (!d.eval_file.empty()) {
    UnpairedDataset eval = load_unpaired_dataset(d.eval_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, 0,
                                                 RowFormat::from_config(d));
    std::cout << "train-kto: " << d.eval_file << ": " << eval.stats.summary() << "\n";
    stats["eval"] = stats_json(d.eval_file, eval.stats);
    split.eval = std::move(eval.examples);
  } else if (d.eval_fraction > 0) {
    split.eval = split_off_eval(split.train, d.eval_fraction, static_cast<uint64_t>(config.train.seed));
    std::cout << "train-kto: " << split.eval.size() << " of the training examples held out for evaluation\n";
  }
  fs::create_directories(config.output.dir);
  write_file_atomic(fs::path(config.output.dir) / "data_stats.json", stats.dump(2) + "\n");
  return split;
}

// TRL's advice on the class weights: desirable_weight x desirable count over undesirable_weight x
// undesirable count in [1, 4/3].
void check_class_balance(const KtoConfig& s, const std::vector<UnpairedExample>& examples) {
  double desirable = 0, undesirable = 0;
  for (const auto& e : examples) (e.desirable ? desirable : undesirable) += 1;
  if (desirable == 0 || undesirable == 0) {
    std::cout << "train-kto: warning: the training data has no " << (desirable == 0 ? "desirable" : "undesirable")
              << " example; KTO learns from both kinds\n";
    return;
  }
  const double ratio = s.desirable_weight * desirable / (s.undesirable_weight * undesirable);
  if (ratio < 1.0 || ratio > 4.0 / 3.0) {
    std::cout << "train-kto: note: desirable_weight x " << desirable << " desirable / (undesirable_weight x "
              << undesirable << " undesirable) = " << ratio << "; KTO's paper keeps it in [1, 4/3], e.g. "
              << "kto.desirable_weight=" << undesirable * s.undesirable_weight / desirable << "\n";
  }
}

}  // namespace

void run_kto(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const KtoConfig& kto = config.kto;
  if (kto.loss_type == KtoLoss::kto && config.train.micro_batch_size < 2) {
    throw ConfigError("train.micro_batch_size: KTO estimates its KL term from the other examples of a micro-batch, so "
                      "it needs at least 2 (got " + std::to_string(config.train.micro_batch_size) + "); raise it, or "
                      "use kto.loss_type apo_zero_unpaired (no KL term)");
  }
  const ReferenceSource reference =
      resolve_reference_source(kto.reference, kto.reference_model, true, config.lora.rank > 0, "kto");
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const Tokenizer tokenizer(tokenizer_path(config));
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  LoadedCausalLm loaded = load_causal_lm(config, dtype);  // on the host; the engine places it
  CausalLM& model = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);
  const fs::path reference_from = reference_folder(reference, config, kto.reference_model, "kto");

  UnpairedSplit data = load_unpaired_split(config, tokenizer, chat_template);
  if (kto.loss_type == KtoLoss::kto && data.train.size() < 2) {
    throw InputError("data.train_file: KTO's KL term pairs each prompt with another example's completion; it needs at "
                     "least 2 examples (got " + std::to_string(data.train.size()) + ")");
  }
  check_class_balance(kto, data.train);
  const auto seed = static_cast<uint64_t>(config.train.seed);
  const int64_t group = config.train.micro_batch_size, max_length = config.data.max_length;
  KtoGroups train = group_kto_examples(std::move(data.train), group, max_length, config.data.shuffle, seed);
  KtoGroups eval = group_kto_examples(std::move(data.eval), group, max_length, false, seed);
  std::cout << "train-kto: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-kto: " << train.groups() << " micro-batches of " << group << " examples with their KL rows, "
            << eval.rows.size() << " eval examples; loss " << enum_name(kto.loss_type) << " (beta " << kto.beta
            << ", desirable_weight " << kto.desirable_weight << ", undesirable_weight " << kto.undesirable_weight
            << "); reference: " << describe_reference(reference, reference_from) << "; model "
            << parameter_count(loaded.shape) << " parameters on " << device.str() << " in "
            << enum_name(config.train.precision) << "\n";
  prepare_lora(*model, config);

  PreferenceEngine held = make_preference_engine(config, loaded.shape, device, *model, reference, reference_from, dtype);
  offload::ParameterEngine* engine = held.engine.get();
  const std::string name = "policy", reference_name = "reference";
  CausalLMImpl* frozen = held.frozen ? held.frozen.get() : nullptr;

  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  if (reference == ReferenceSource::precomputed) {
    precompute_reference(config, kto.reference_model, "kto", *engine, name, *model, train.rows, eval.rows, pad_id, 1.0,
                         "examples with their KL rows");
  }

  KtoBatchSource source(std::move(train), std::move(eval), pad_id, seed, config.data.shuffle);
  KtoObjective objective(kto, reference, name, *model, reference_name, frozen);
  Trainer trainer(config, *engine, source, objective, stage_trained_model(name, *model, loaded.shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-kto", "examples", {"rewards/margins", "kl"});
}

}  // namespace ferry
