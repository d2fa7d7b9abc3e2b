// `ferry train-sft`: SFT data and loss plugged into the shared loop.
#include "stages/sft.h"

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "offload/engine.h"
#include "src/data/token_batch.h"
#include "src/model/lora.h"
#include "src/model/quantized_base.h"
#include "src/tokenizer/chat_template.h"
#include "src/tokenizer/chat_template_resolve.h"
#include "src/tokenizer/tokenizer.h"
#include "train/backbone_runner.h"
#include "train/device_choice.h"
#include "train/run_engine.h"
#include "train/run_to_the_end.h"
#include "train/trainer.h"
#include "src/model/family/model_tensors.h"

namespace ferry {

void run_sft(const Config& given) {
  Config config = given;  // offload.policy auto may choose a smaller micro-batch (make_run_engine)
  const c10::Device device = training_device(config.train.device);
  const at::ScalarType dtype = weight_dtype(config.train.precision);
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  const Tokenizer tokenizer(tokenizer_path(config));
  // Built on the host: the engine places the weights on the device as its policy says (a model
  // bigger than the GPU never goes there whole).
  LoadedCausalLm loaded = load_causal_lm(config, dtype);
  CausalLM& model = loaded.model;
  check_tokenizer_fits(tokenizer, loaded.shape);
  const ChatTemplate chat_template = resolve_chat_template(config.tokenizer, tokenizer);
  const DataConfig& d = config.data;
  if (d.train_file.empty()) throw ConfigError("data.train_file: SFT needs a training jsonl of {\"messages\": [...]}");
  SftDataset train = load_sft_dataset(d.train_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, d.max_samples,
                                      RowFormat::from_config(d));
  std::vector<TokenizedSample> eval;
  if (!d.eval_file.empty()) {
    eval = load_sft_dataset(d.eval_file, tokenizer, chat_template, d.max_length, d.skip_bad_lines, 0,
                            RowFormat::from_config(d)).samples;
  } else if (d.eval_fraction > 0) {
    eval = split_off_eval(train.samples, d.eval_fraction, static_cast<uint64_t>(config.train.seed));
  }
  std::cout << "train-sft: chat template " << chat_template.name << " (" << chat_template.source << ")\n"
            << "train-sft: " << d.train_file << ": " << train.stats.summary() << "\n"
            << "train-sft: " << eval.size() << " eval samples; model " << parameter_count(loaded.shape)
            << " parameters on " << device.str() << " in " << enum_name(config.train.precision) << "\n";

  prepare_lora(*model, config);
  if (config.lora.rank > 0) {
    int64_t adapter_parameters = 0;
    for (const auto& [n, t] : lora_state(*model)) adapter_parameters += t.numel();
    std::cout << "train-sft: LoRA rank " << config.lora.rank << " on " << config.lora.target_modules.size()
              << " projections per layer: " << adapter_parameters << " trainable parameters, base weights frozen\n";
  }
  if (const QuantizedBaseSize base = quantized_base_size(*model); base.projections > 0) {
    const bool nf4 = config.lora.quantize_base == BaseQuantization::nf4;
    const bool gguf = config.lora.quantize_base == BaseQuantization::gguf;
    std::cout << "train-sft: QLoRA base: " << base.projections << " projections (" << base.weights << " weights) in "
              << (nf4 ? "NF4" : gguf ? "the GGUF's ggml blocks" : "int8") << (nf4 && config.lora.double_quant ? " with double quantisation" : "") << ": "
              << base.bytes << " bytes, " << base.bytes_per_weight() << " bytes per weight\n";
  }
  auto engine = make_run_engine(config, loaded.shape, device, std::cout);
  const std::string name = "policy";
  engine->add_model(name, offload::group_parameters(*model, /*trainable_only=*/false), /*trainable=*/true);
  model->to(device);  // the buffers; the parameters are where the engine put them

  SftBatchSource::Options data_options =
      SftBatchSource::Options::from_config(config, stage_pad_id(loaded.shape, tokenizer));
  data_options.packing = d.packing;
  SftBatchSource source(std::move(train.samples), std::move(eval), data_options);
  SftObjective objective(name, *model);

  Trainer trainer(config, *engine, source, objective,
                  stage_trained_model(name, *model, loaded.shape, config, tokenizer));
  run_to_the_end(trainer, config, *engine, device, "train-sft", d.packing ? "samples (packed)" : "samples");
}

}  // namespace ferry
