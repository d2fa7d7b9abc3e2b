// `ferry train-sft`: SFT data and loss plugged into the shared loop.
#include "stages/sft.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "offload/accountant.h"
#include "offload/engine.h"
#include "src/core/byte_size.h"
#include "src/core/error.h"
#include "src/data/token_batch.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_export.h"
#include "src/io/lora_adapter.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/tokenizer.h"
#include "src/train/backbone_runner.h"
#include "src/train/checkpoint_folders.h"
#include "src/train/device_choice.h"
#include "src/train/run_engine.h"
#include "src/train/trainer.h"

namespace fs = std::filesystem;

namespace ferry {

SftBatchSource::SftBatchSource(std::vector<TokenizedSample> train, std::vector<TokenizedSample> eval,
                               const Options& options)
    : train_(std::move(train)), eval_(std::move(eval)), options_(options) {
  if (train_.empty()) throw InputError("data.train_file: no training samples left after loading and truncation");
  samples_per_batch_ = options.micro_batch_size;
  if (options.packing) {
    int64_t tokens = 0;
    for (const auto& s : train_) tokens += static_cast<int64_t>(s.ids.size());
    const int64_t mean = std::max<int64_t>(1, tokens / static_cast<int64_t>(train_.size()));
    samples_per_batch_ = options.micro_batch_size * std::max<int64_t>(1, options.max_length / mean);
  }
  sampler_.emplace(train_.size(), options.seed, options.shuffle);
}

int64_t SftBatchSource::batches_per_epoch() const {
  return (static_cast<int64_t>(train_.size()) + samples_per_batch_ - 1) / samples_per_batch_;
}

MicroBatch SftBatchSource::collate(const std::vector<const TokenizedSample*>& samples) const {
  const TokenBatch batch = options_.packing ? collate_packed(samples, options_.pad_id, options_.max_length)
                                            : collate_padded(samples, options_.pad_id);
  MicroBatch out;
  out.tensors["input_ids"] = batch.input_ids;  // (B, T)
  out.tensors["attention_mask"] =
      options_.packing ? packed_attention_mask(batch.segment_ids) : batch.attention_mask;  // (B,1,T,T) | (B, T)
  out.tensors["position_ids"] = batch.position_ids;  // (B, T)
  out.tensors["labels"] = batch.labels;              // (B, T)
  out.loss_weight = shifted_label_count(batch.labels);
  out.tokens = batch.tokens;
  return out;
}

MicroBatch SftBatchSource::next_train_batch() {
  const std::vector<int64_t> indices = sampler_->next(static_cast<size_t>(samples_per_batch_));
  std::vector<const TokenizedSample*> samples;
  for (int64_t i : indices) samples.push_back(&train_[static_cast<size_t>(i)]);
  return collate(samples);
}

DataCursor SftBatchSource::cursor() const { return sampler_->cursor(); }

void SftBatchSource::restore(const DataCursor& cursor) {
  sampler_.emplace(train_.size(), options_.seed, options_.shuffle, cursor);
}

std::vector<MicroBatch> SftBatchSource::eval_batches() const {
  std::vector<MicroBatch> batches;
  for (size_t begin = 0; begin < eval_.size(); begin += static_cast<size_t>(options_.micro_batch_size)) {
    std::vector<const TokenizedSample*> samples;
    for (size_t i = begin; i < std::min(eval_.size(), begin + static_cast<size_t>(options_.micro_batch_size)); ++i) {
      samples.push_back(&eval_[i]);
    }
    batches.push_back(collate(samples));
  }
  return batches;
}

torch::Tensor causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  const int64_t length = logits.size(1);
  const torch::Tensor predicted = logits.narrow(1, 0, length - 1).to(torch::kFloat);      // (B, T-1, V)
  const torch::Tensor targets = labels.narrow(1, 1, length - 1).to(logits.device());     // (B, T-1)
  return torch::nn::functional::cross_entropy(
      predicted.reshape({-1, predicted.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(kIgnoreLabel));
}

int64_t shifted_label_count(const torch::Tensor& labels) {
  return labels.narrow(1, 1, labels.size(1) - 1).ne(kIgnoreLabel).sum().item<int64_t>();
}

LossSum SftObjective::loss(const MicroBatch& batch, BackboneRunner& runner) {
  const torch::Tensor logits =
      runner.causal_lm(name_, model_, batch.at("input_ids"), batch.at("attention_mask"), batch.at("position_ids"));
  return {causal_lm_loss_sum(logits, batch.at("labels")), {}};
}

namespace {

// tokenizer.path, else <model.path>/tokenizer.model.
std::string tokenizer_path(const Config& config) {
  if (!config.tokenizer.path.empty()) return config.tokenizer.path;
  if (!config.model.path.empty()) return (fs::path(config.model.path) / "tokenizer.model").string();
  throw ConfigError("tokenizer.path: no tokenizer given; set tokenizer.path (a training run from model.config "
                    "has no model folder to take tokenizer.model from)");
}

struct LoadedModel {
  LlamaForCausalLM model{nullptr};
  LlamaConfig shape;
};

LoadedModel load_model(const Config& config, c10::Device device, at::ScalarType dtype) {
  LoadedModel out;
  if (!config.model.path.empty()) {
    out.model = causal_lm_from_pretrained(config.model.path, dtype, device);
    out.shape = out.model->config();
  } else if (!config.model.config.empty()) {
    out.shape = io::read_hf_config(config.model.config);
    out.model = LlamaForCausalLM(out.shape);
    init_llama_weights(*out.model, out.shape, 0.02, static_cast<uint64_t>(config.train.seed));
    out.model->to(device, dtype);
  } else {
    throw ConfigError("model: set model.path (a Hugging Face folder) or model.config (a config.json to start from scratch)");
  }
  out.shape.torch_dtype = dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
  out.model->train();
  return out;
}

}  // namespace

void prepare_lora(LlamaForCausalLMImpl& model, const Config& config) {
  if (config.lora.rank <= 0) return;
  apply_lora(*model.model, config.lora, static_cast<uint64_t>(config.train.seed));
  freeze_base_weights(model);
}

TrainedModel sft_trained_model(const std::string& name, LlamaForCausalLMImpl& model, const LlamaConfig& shape,
                               const Config& config, const std::string& tokenizer_file) {
  std::optional<io::LoraAdapterConfig> adapter;
  if (config.lora.rank > 0) {
    adapter.emplace();
    adapter->rank = config.lora.rank;
    adapter->alpha = config.lora.alpha;
    adapter->dropout = config.lora.dropout;
    for (const auto& target : lora_target_names()) {  // in a fixed order, whatever the config's
      const auto& wanted = config.lora.target_modules;
      if (std::find(wanted.begin(), wanted.end(), target) != wanted.end()) adapter->target_modules.push_back(target);
    }
    if (!config.model.path.empty()) adapter->base_model = fs::absolute(config.model.path).lexically_normal().string();
  }
  TrainedModel trained;
  trained.name = name;
  trained.save = [&model, shape, adapter, tokenizer_file](const fs::path& folder) {
    save_pretrained(model, shape, folder);
    if (adapter) io::write_adapter_config(folder / io::kAdapterConfigFile, *adapter);
    if (!tokenizer_file.empty()) {
      fs::copy_file(tokenizer_file, folder / "tokenizer.model", fs::copy_options::overwrite_existing);
    }
  };
  trained.load = [&model](const fs::path& folder) {
    LoadStateOptions options;
    options.source = folder.string();
    load_state(model, io::load_hf_weights(folder), options);
  };
  return trained;
}

void export_lora_final(const fs::path& final_dir, const Config& config) {
  if (config.lora.rank <= 0) return;
  write_folder_atomic(final_dir, [&](const fs::path& folder) {
    io::HfExportOptions options;
    options.checkpoint = final_dir;
    options.output = folder;
    options.lora = config.lora.export_as == LoraExport::adapter ? io::LoraExport::adapter : io::LoraExport::merged;
    io::export_hf_model(options);
  });
}

void run_sft(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const std::string tokenizer_file = tokenizer_path(config);
  const Tokenizer tokenizer(tokenizer_file);
  // Built on the host: the engine places the weights on the device as its policy says (a model
  // bigger than the GPU never goes there whole).
  LoadedModel loaded = load_model(config, c10::kCPU, dtype);
  LlamaForCausalLM& model = loaded.model;
  if (tokenizer.vocab_size() > loaded.shape.vocab_size) {
    throw InputError(detail::concat(tokenizer.path(), " has ", tokenizer.vocab_size(), " tokens but the model has only ",
                                    loaded.shape.vocab_size, "; use the model's own tokenizer or a larger vocab_size"));
  }
  const ChatTemplate chat_template = load_chat_template(config.tokenizer.chat_template);
  const DataConfig& d = config.data;
  if (d.train_file.empty()) throw ConfigError("data.train_file: SFT needs a training jsonl of {\"messages\": [...]}");
  SftDataset train = load_sft_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, d.max_samples);
  std::vector<TokenizedSample> eval;
  if (!d.eval_file.empty()) {
    eval = load_sft_dataset(d.eval_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines).samples;
  } else if (d.eval_fraction > 0) {
    eval = split_off_eval(train.samples, d.eval_fraction, static_cast<uint64_t>(config.train.seed));
  }
  std::cout << "train-sft: " << d.train_file << ": " << train.stats.summary() << "\n"
            << "train-sft: " << eval.size() << " eval samples; model " << loaded.shape.num_parameters()
            << " parameters on " << device.str() << " in " << enum_name(config.train.precision) << "\n";

  prepare_lora(*model, config);
  if (config.lora.rank > 0) {
    int64_t adapter_parameters = 0;
    for (const auto& [n, t] : lora_state(*model)) adapter_parameters += t.numel();
    std::cout << "train-sft: LoRA rank " << config.lora.rank << " on " << config.lora.target_modules.size()
              << " projections per layer: " << adapter_parameters << " trainable parameters, base weights frozen\n";
  }
  auto engine = make_run_engine(config, loaded.shape, device, std::cout);
  const std::string name = "policy";
  engine->add_model(name, group_parameters(*model, /*trainable_only=*/false), /*trainable=*/true);
  model->to(device);  // the buffers; the parameters are where the engine put them

  SftBatchSource::Options data_options;
  data_options.micro_batch_size = config.train.micro_batch_size;
  data_options.pad_id = loaded.shape.pad_token_id >= 0 ? loaded.shape.pad_token_id : std::max<int64_t>(0, tokenizer.pad_id());
  data_options.seed = static_cast<uint64_t>(config.train.seed);
  data_options.shuffle = d.shuffle;
  data_options.packing = d.packing;
  data_options.max_length = d.max_length;
  SftBatchSource source(std::move(train.samples), std::move(eval), data_options);
  SftObjective objective(name, *model);

  const TrainedModel trained = sft_trained_model(name, *model, loaded.shape, config, tokenizer.path());
  Trainer trainer(config, *engine, source, objective, trained);
  std::cout << "train-sft: " << trainer.total_steps() << " steps of " << config.train.micro_batch_size << " x "
            << config.train.grad_accumulation << " samples" << (d.packing ? " (packed)" : "") << "\n"
            << engine->memory_report().summary();
  const TrainResult result = trainer.run();
  if (result.interrupted()) {
    throw Interrupted(result.stop_signal, detail::concat("train-sft: interrupted after step ", result.steps,
                                                         "; resume with --set train.resume=auto"));
  }
  if (!result.final_dir.empty()) export_lora_final(result.final_dir, config);
  std::cout << "train-sft: " << result.steps << " steps, last loss " << result.last_loss;
  if (result.eval_loss) std::cout << ", eval loss " << *result.eval_loss;
  std::cout << "\n";
  const offload::MemoryAccountant& memory = engine->accountant();
  std::cout << "train-sft: engine peak (weights, gradients, optimizer state; activations not counted): "
            << format_bytes_approx(memory.peak(offload::MemoryTier::device)) << " on the device, "
            << format_bytes_approx(memory.peak(offload::MemoryTier::host)) << " on the host\n";
  if (const uint64_t reserved = device_memory_peak(device); reserved > 0) {
    std::cout << "train-sft: CUDA allocator peak (everything, activations included): " << format_bytes_approx(reserved)
              << " reserved on " << device.str() << "\n";
  }
}

}  // namespace ferry
