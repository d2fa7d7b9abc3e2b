// `ferry train-distill`: the teacher, on-policy answers and GKD's divergence plugged into the
// shared loop (see distill.h).
#include "stages/distill.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <iostream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/fnv1a.h"
#include "kernels/ops/chunked_lm_head.h"
#include "offload/engine.h"
#include "src/data/sft_dataset.h"
#include "src/data/token_batch.h"
#include "src/generate/chat_generate_options.h"
#include "src/generate/prompt_batch.h"
#include "src/io/hf_config.h"
#include "src/model/attention_mask.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/gkd_loss.h"
#include "train/model_setup.h"
#include "train/run_engine.h"
#include "train/run_to_the_end.h"
#include "train/sft_batches.h"
#include "train/trainer.h"
#include "src/model/family/model_tensors.h"

namespace fs = std::filesystem;

namespace ferry {
namespace {

// SFT's micro-batches, each one unit of the loss (its own token mean).
class DistillBatchSource : public SftBatchSource {
 public:
  using SftBatchSource::SftBatchSource;

 protected:
  MicroBatch collate(bool eval, const std::vector<int64_t>& indices) const override {
    MicroBatch batch = SftBatchSource::collate(eval, indices);
    batch.loss_weight = 1;
    return batch;
  }
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t ids_hash(const torch::Tensor& ids, uint64_t seed) {
  const torch::Tensor c = ids.to(torch::kCPU, torch::kLong).contiguous();
  Fnv1a hash;
  hash.add(&seed, sizeof seed);
  hash.add(c.data_ptr<int64_t>(), static_cast<size_t>(c.numel()) * sizeof(int64_t));
  return splitmix64(hash.state);
}

}  // namespace

DistillObjective::DistillObjective(const DistillConfig& settings, offload::ParameterEngine& engine,
                                   std::string student_name, CausalLMImpl& student, std::string teacher_name,
                                   CausalLMImpl& teacher, GenerateOptions generation, int64_t pad_id,
                                   uint64_t seed)
    : settings_(settings),
      engine_(engine),
      student_name_(std::move(student_name)),
      teacher_name_(std::move(teacher_name)),
      student_(student),
      teacher_(teacher),
      generation_(std::move(generation)),
      pad_id_(pad_id),
      seed_(seed) {}

bool DistillObjective::draws_on_policy(const MicroBatch& batch) const {
  if (settings_.lmbda <= 0) return false;
  const double u = static_cast<double>(ids_hash(batch.at("input_ids"), seed_) >> 11) * 0x1.0p-53;
  return u < settings_.lmbda;
}

MicroBatch DistillObjective::on_policy_batch(const MicroBatch& batch) {
  const torch::Tensor ids = batch.at("input_ids"), labels = batch.at("labels");
  std::vector<std::vector<int64_t>> prompts;
  std::vector<at::Generator> generators;
  for (int64_t row = 0; row < ids.size(0); ++row) {
    const torch::Tensor trained = labels[row].ne(kIgnoreLabel);
    const int64_t first = trained.any().item<bool>() ? trained.to(torch::kLong).argmax().item<int64_t>() : ids.size(1);
    const torch::Tensor prompt = ids[row].narrow(0, 0, std::max<int64_t>(first, 1)).contiguous();
    prompts.emplace_back(prompt.data_ptr<int64_t>(), prompt.data_ptr<int64_t>() + prompt.numel());
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(ids_hash(prompt, seed_ ^ splitmix64(row + 1))));
  }
  const PromptBatch prompt_batch = left_pad(prompts, pad_id_);
  GenerateOptions options = generation_;
  options.row_generators = &generators;
  engine_.make_resident({student_name_});  // generation: the student alone
  GenerateResult result;
  {
    torch::NoGradGuard no_grad;
    result = generate(student_, prompt_batch.input_ids, prompt_batch.attention_mask, options);
  }
  engine_.make_resident({});  // scoring and learning: every model as the policy places it
  MicroBatch out;
  const torch::Tensor tokens = result.tokens.cpu(), mask = result.attention_mask.cpu();
  torch::Tensor answer_labels = tokens.masked_fill(mask.eq(0), kIgnoreLabel);
  answer_labels.narrow(1, 0, result.prompt_length).fill_(kIgnoreLabel);
  out.tensors["input_ids"] = tokens;
  out.tensors["attention_mask"] = mask;
  out.tensors["position_ids"] = position_ids_from_attention_mask(mask);
  out.tensors["labels"] = answer_labels;
  out.loss_weight = batch.loss_weight;
  out.tokens = mask.sum().item<int64_t>();
  return out;
}

LossSum DistillObjective::loss(const MicroBatch& given, BackboneRunner& runner) {
  // Evaluation (no gradients) takes the dataset's answers.
  const bool on_policy = torch::GradMode::is_enabled() && draws_on_policy(given);
  const MicroBatch batch = on_policy ? on_policy_batch(given) : given;
  const int64_t columns = batch.at("labels").size(1) - 1;
  const torch::Tensor targets = batch.at("labels").narrow(1, 1, columns).reshape({-1});
  const torch::Tensor answer = targets.ne(kIgnoreLabel).nonzero().squeeze(1);  // flat (row, column) of each answer token
  const int64_t tokens = answer.size(0);
  // The hidden states of the answer tokens' predecessors, (K, hidden). The head functions capture by
  // value: a paging policy recomputes the head during backward, after this function has returned.
  auto answer_rows = [answer](const torch::Tensor& hidden) {
    return hidden.reshape({-1, hidden.size(-1)}).index_select(0, answer.to(hidden.device()));
  };
  const double temperature = settings_.temperature, beta = settings_.beta;
  torch::Tensor teacher;  // (K, V) log-probabilities
  {
    torch::NoGradGuard no_grad;
    teacher = runner.causal_lm_head(teacher_name_, teacher_, batch.at("input_ids"), batch.at("attention_mask"),
                                    batch.at("position_ids"), 0, columns,
                                    [answer_rows, temperature](const torch::Tensor& hidden, const torch::Tensor& weight,
                                                               double softcap) {
                                      return teacher_log_probs(
                                          kernels::soft_cap(answer_rows(hidden).matmul(weight.t()), softcap), temperature);
                                    });
  }
  const torch::Tensor divergence = runner.causal_lm_head(
      student_name_, student_, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"), 0, columns,
      [answer_rows, teacher, beta, temperature](const torch::Tensor& hidden, const torch::Tensor& weight, double softcap) {
        return generalized_jsd(kernels::soft_cap(answer_rows(hidden).matmul(weight.t()), softcap),
                               teacher.to(hidden.device()), beta, temperature);
      });
  const torch::Tensor mean = divergence.sum() / static_cast<double>(std::max<int64_t>(tokens, 1));
  return {mean, {{"on_policy", on_policy ? 1.0 : 0.0}, {"answer_tokens", static_cast<double>(tokens)}}};
}

void check_same_tokenizer(const ModelShape& student, const std::string& student_tokenizer, const ModelShape& teacher,
                          const std::string& teacher_folder) {
  if (student.vocab_size != teacher.vocab_size) {
    throw ConfigError("distill.teacher_model: the teacher (" + teacher_folder + ") has a vocabulary of " +
                      std::to_string(teacher.vocab_size) + " tokens, the student " + std::to_string(student.vocab_size) +
                      "; distillation compares their next-token distributions, so they must share a tokenizer");
  }
  const fs::path mine(student_tokenizer);
  const fs::path theirs = fs::path(teacher_folder) / mine.filename();
  std::error_code error;
  if (fs::is_regular_file(theirs, error) && fs::is_regular_file(mine, error) &&
      file_fingerprint(theirs.string()) != file_fingerprint(mine.string())) {
    throw ConfigError("distill.teacher_model: " + theirs.string() + " differs from the student's tokenizer " +
                      mine.string() + "; distillation compares token distributions, so teacher and student must "
                      "share a tokenizer");
  }
}

void run_distill(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const DistillConfig& d = config.distill;
  if (d.teacher_model.empty()) {
    throw ConfigError("distill.teacher_model: train-distill needs the teacher's folder (a Hugging Face causal LM, a "
                      ".gguf file or ollama:NAME)");
  }
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const std::string tokenizer_file = tokenizer_path(config);
  const Tokenizer tokenizer(tokenizer_file);
  LoadedCausalLm loaded = load_causal_lm(config, dtype);  // the student, on the host
  CausalLM& student = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);
  const fs::path teacher_json = fs::path(d.teacher_model) / "config.json";
  if (!fs::exists(teacher_json)) {
    throw ConfigError("distill.teacher_model: " + d.teacher_model + " has no config.json: give a Hugging Face model "
                      "folder, a .gguf file or ollama:NAME");
  }
  check_same_tokenizer(loaded.shape, tokenizer_file, io::read_hf_config(teacher_json), d.teacher_model);
  CausalLM teacher = causal_lm_from_pretrained(d.teacher_model, dtype, c10::kCPU);
  for (auto& p : teacher->parameters()) p.set_requires_grad(false);
  const ModelShape& teacher_shape = teacher->config();
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  const DataConfig& data = config.data;
  if (data.train_file.empty()) {
    throw ConfigError("data.train_file: train-distill needs a jsonl of {\"messages\": [...]}: its prompts, and its "
                      "answers for the micro-batches that are not on-policy");
  }
  SftDataset train = load_sft_dataset(data.train_file, tokenizer, chat_template, data.max_length, data.skip_bad_lines,
                                      data.max_samples, RowFormat::from_config(data));
  std::vector<TokenizedSample> eval;
  if (!data.eval_file.empty()) {
    eval = load_sft_dataset(data.eval_file, tokenizer, chat_template, data.max_length, data.skip_bad_lines, 0,
                            RowFormat::from_config(data)).samples;
  } else if (data.eval_fraction > 0) {
    eval = split_off_eval(train.samples, data.eval_fraction, static_cast<uint64_t>(config.train.seed));
  }
  const int64_t student_parameters = parameter_count(loaded.shape), teacher_parameters = parameter_count(teacher_shape);
  std::cout << "train-distill: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-distill: " << data.train_file << ": " << train.stats.summary() << "\n"
            << "train-distill: " << eval.size() << " eval samples; student " << student_parameters
            << " parameters, teacher " << teacher_parameters << " (" << d.teacher_model << ", frozen), on "
            << device.str() << " in " << enum_name(config.train.precision) << "; beta " << d.beta << ", lmbda "
            << d.lmbda << ", temperature " << d.temperature << "\n";
  prepare_lora(*student, config);

  // The auto planner sizes for the larger of the two, each within half the budget.
  const ModelShape& largest = teacher_parameters > student_parameters ? teacher_shape : loaded.shape;
  auto engine = make_run_engine(config, largest, device, std::cout, 2);
  const std::string student_name = "policy", teacher_name = "teacher";
  engine->add_model(student_name, offload::group_parameters(*student, /*trainable_only=*/false), /*trainable=*/true);
  student->to(device);
  engine->add_model(teacher_name, offload::group_parameters(*teacher, false), /*trainable=*/false);
  teacher->to(device);

  const int64_t pad_id = stage_pad_id(loaded.shape, tokenizer);
  DistillBatchSource source(std::move(train.samples), std::move(eval), SftBatchSource::Options::from_config(config, pad_id));
  GenerateOptions generation = chat_generate_options(loaded.shape, tokenizer, &chat_template);
  generation.max_new_tokens = config.generation.max_new_tokens;
  generation.sampling = {config.generation.greedy, config.generation.temperature, config.generation.top_k,
                         config.generation.top_p};
  generation.pad_token_id = pad_id;
  generation.cuda_graphs = config.generation.cuda_graphs;
  generation.max_rows = config.generation.max_batch_rows;
  DistillObjective objective(d, *engine, student_name, *student, teacher_name, *teacher, generation, pad_id,
                             static_cast<uint64_t>(config.train.seed));
  Trainer trainer(config, *engine, source, objective,
                  stage_trained_model(student_name, *student, loaded.shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-distill", "samples", {"answer_tokens"});
}

}  // namespace ferry
