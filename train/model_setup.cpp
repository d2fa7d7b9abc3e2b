// How a stage sets up and saves its model (see model_setup.h).
#include "train/model_setup.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <utility>

#include "offload/accountant.h"
#include <nlohmann/json.hpp>

#include "core/byte_size.h"
#include "core/config/config_io.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/fnv1a.h"
#include "src/dist/communicator.h"
#include "src/io/hf_checkpoint.h"
#include "src/io/hf_config.h"
#include "src/io/hf_export.h"
#include "src/io/hf_tensor_specs.h"
#include "src/io/lora_adapter.h"
#include "src/io/nf4_checkpoint.h"
#include "src/model/family/model_tensors.h"
#include "src/model/lora.h"
#include "src/model/model_state.h"
#include "src/model/pretrained.h"
#include "src/model/quantized_base.h"
#include "src/tokenizer/tokenizer.h"
#include "train/checkpoint_folders.h"
#include "train/run_engine.h"

namespace fs = std::filesystem;

namespace ferry {

namespace {

// The tokenizer file a model folder holds itself, if any.
std::optional<fs::path> folder_tokenizer(const fs::path& folder) {
  std::error_code error;
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    if (fs::is_regular_file(folder / name, error)) return folder / name;
  }
  return std::nullopt;
}

// Whether two tokenizer files are the same tokenizer: the same bytes, or (a tokenizer.model
// rebuilt from a GGUF file's metadata is not byte-equal to the original) the same pieces for every id.
bool same_tokenizer(const fs::path& a, const fs::path& b) {
  std::error_code error;
  if (fs::equivalent(a, b, error)) return true;
  if (fs::file_size(a, error) == fs::file_size(b, error) && !error && read_file(a) == read_file(b)) return true;
  const Tokenizer first(a.string()), second(b.string());
  if (first.vocab_size() != second.vocab_size()) return false;
  for (int64_t id = 0; id < first.vocab_size(); ++id) {
    if (first.id_to_piece(id) != second.id_to_piece(id)) return false;
  }
  return true;
}

}  // namespace

std::string tokenizer_path(const Config& config) {
  if (!config.tokenizer.path.empty()) {
    // A demo config's tokenizer.path copied onto a real model is a silent trap: a model folder that
    // holds its own tokenizer must be read with it.
    std::error_code error;
    if (!config.model.path.empty() && fs::is_directory(config.model.path, error)) {
      const auto own = folder_tokenizer(config.model.path);
      fs::path given = config.tokenizer.path;
      if (fs::is_directory(given, error)) {
        if (const auto inside = folder_tokenizer(given)) given = *inside;
      }
      if (own && fs::is_regular_file(given, error) && !same_tokenizer(*own, given)) {
        throw ConfigError("tokenizer.path: '" + config.tokenizer.path + "' is not the tokenizer of model.path '" +
                          config.model.path + "', which has its own (" + own->filename().string() +
                          "); drop tokenizer.path to use the model's (a model trained with another tokenizer reads "
                          "its token ids as other words)");
      }
    }
    return config.tokenizer.path;
  }
  if (!config.model.path.empty()) return config.model.path;
  throw ConfigError("tokenizer.path: no tokenizer given; set tokenizer.path (a training run from model.config "
                    "has no model folder to take the tokenizer from)");
}

void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelShape& shape) {
  if (tokenizer.vocab_size() > shape.vocab_size) {
    throw InputError(detail::concat(tokenizer.path(), " has ", tokenizer.vocab_size(), " tokens but the model has only ",
                                    shape.vocab_size, "; use the model's own tokenizer or a larger vocab_size"));
  }
}

int64_t stage_pad_id(const ModelShape& shape, const Tokenizer& tokenizer) {
  return shape.pad_token_id >= 0 ? shape.pad_token_id : std::max<int64_t>(0, tokenizer.pad_id());
}

std::string torch_dtype_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

namespace {

// The one-line notes about a model folder that stores its projections quantised
// (src/model/quantized_base.h): what Ferry did with the stored weights under lora.quantize_base.
void note_quantized_folder(const Config& config, const QuantizedLoadReport* report, at::ScalarType dtype) {
  const std::string& path = config.model.path;
  if (report == nullptr) {
    if (io::has_nf4_weights(io::HfWeights(path))) {
      std::cout << "note: model.path " << path << " stores its projections in 4 bits (bitsandbytes NF4); "
                << "lora.quantize_base is none, so they are dequantised into a " << torch_dtype_name(dtype)
                << " base (set lora.quantize_base=nf4 to train on them as stored)\n";
    }
    return;
  }
  if (config.lora.quantize_base == BaseQuantization::gguf) {
    std::cout << "note: model.path " << path << " is a GGUF model: " << report->stored
              << " projections kept in the file's blocks (";
    const char* separator = "";
    for (const auto& [type, count] : report->ggml_types) std::cout << std::exchange(separator, ", ") << count << " " << type;
    std::cout << ")";
    if (!report->kept_float.empty()) {
      std::cout << "; " << report->kept_float.size() << " stored as floats stay " << torch_dtype_name(dtype);
    }
    std::cout << "\n";
    return;
  }
  if (report->stored > 0 && config.lora.quantize_base == BaseQuantization::int8) {
    std::cout << "note: model.path " << path << " stores " << report->stored << " projections in int8: used as stored\n";
  } else if (report->stored > 0) {
    const bool asked = config.lora.double_quant;
    std::cout << "note: model.path " << path << " stores " << report->stored << " projections in 4 bits (NF4"
              << (report->stored_double_quant == report->stored ? ", double-quantised"
                  : report->stored_double_quant == 0         ? ", not double-quantised"
                                                          : ", some double-quantised")
              << "): used as stored";
    if (report->stored_double_quant_differs(asked)) {
      std::cout << "; lora.double_quant " << (asked ? "true" : "false")
                << " applies only to weights Ferry quantises itself";
    }
    std::cout << "\n";
  }
  if (!report->kept_float.empty()) {
    std::cout << "note: model.path " << path << " stores " << report->kept_float.size()
              << " projections in full precision (e.g. " << report->kept_float.front()
              << ": quantization_config.llm_int8_skip_modules); they stay so, as transformers runs them\n";
  }
}

}  // namespace

LoadedCausalLm load_causal_lm(const Config& config, at::ScalarType dtype) {
  LoadedCausalLm out;
  const BaseQuantization kind = config.lora.quantize_base;
  const bool quantized = kind != BaseQuantization::none;
  if (!config.model.path.empty()) {
    QuantizedLoadReport report;
    out.model = quantized ? causal_lm_from_pretrained_quantized(config.model.path, dtype, kind,
                                                                config.lora.double_quant, &report)
                          : causal_lm_from_pretrained(config.model.path, dtype, c10::kCPU);
    note_quantized_folder(config, quantized ? &report : nullptr, dtype);
    out.shape = out.model->config();
  } else if (!config.model.config.empty()) {
    out.shape = io::read_hf_config(config.model.config);
    io::check_model_fits_host(out.shape, build_bytes_per_parameter(dtype), 0, "model.config " + config.model.config);
    out.model = CausalLM(out.shape);
    init_model_weights(*out.model, out.shape, 0.02, static_cast<uint64_t>(config.train.seed));
    out.model->to(dtype);
    if (quantized) quantize_base(*out.model->model, kind, config.lora.double_quant);
  } else {
    throw ConfigError("model: set model.path (a Hugging Face folder) or model.config (a config.json to start from scratch)");
  }
  out.shape.torch_dtype = torch_dtype_name(dtype);
  out.model->train();
  return out;
}

void require_full_precision_base(const Config& config, const std::string& stage) {
  if (config.lora.quantize_base == BaseQuantization::none) return;
  throw ConfigError("lora.quantize_base " + std::string(enum_name(config.lora.quantize_base)) + ": " + stage +
                    " does not train on a quantised base yet (train-sft, train-dpo, train-ppo and train-grpo do); set "
                    "lora.quantize_base=none");
}

void prepare_lora(torch::nn::Module& model, DecoderModelImpl& backbone, const Config& config) {
  if (config.lora.rank <= 0) return;
  const LoraCoverage coverage = apply_lora(backbone, config.lora, static_cast<uint64_t>(config.train.seed));
  if (coverage.expert_matrices > 0) {  // never miss the experts silently
    std::cout << "LoRA: " << coverage.adapted << " projections carry adapters; " << coverage.adapted_experts << " of the "
              << coverage.expert_matrices << " expert matrices"
              << (coverage.adapted_experts == 0 ? " (none: add gate_proj/up_proj/down_proj, w1/w3/w2 or `experts` to "
                                                  "lora.target_modules to adapt the experts)"
                                                : "")
              << "\n";
  }
  freeze_base_weights(model);
}

TrainedModel stage_trained_model(const std::string& name, torch::nn::Module& model, const ModelShape& shape,
                                 const Config& config, const Tokenizer& tokenizer) {
  std::optional<io::LoraAdapterConfig> adapter;
  if (config.lora.rank > 0) {
    adapter.emplace();
    adapter->rank = config.lora.rank;
    adapter->alpha = config.lora.alpha;
    adapter->dropout = config.lora.dropout;
    // The model's own projection names (qkv_proj on Phi-3), in its order, whatever the config's.
    adapter->target_modules = resolve_lora_targets(shape, config.lora.target_modules);
    if (!config.model.path.empty()) adapter->base_model = fs::absolute(config.model.path).lexically_normal().string();
  }
  TrainedModel trained;
  trained.name = name;
  // The main file under its standard name (data/tokenizer.model becomes tokenizer.model), the
  // side files under theirs.
  std::vector<std::pair<std::string, std::string>> tokenizer_files;
  for (const auto& file : tokenizer.files()) {
    const bool main = tokenizer_files.empty();
    const std::string name = !main ? tokenizer.side_file_name(file)
                             : tokenizer.kind() == TokenizerKind::sentencepiece ? "tokenizer.model"
                                                                                : "tokenizer.json";
    tokenizer_files.emplace_back(file, name);
  }
  trained.save = [&model, shape, adapter, tokenizer_files](const fs::path& folder) {
    save_pretrained(model, shape, folder);
    if (adapter) io::write_adapter_config(folder / io::kAdapterConfigFile, *adapter);
    for (const auto& [file, name] : tokenizer_files) {
      fs::create_directories((folder / name).parent_path());  // additional_chat_templates/
      fs::copy_file(file, folder / name, fs::copy_options::overwrite_existing);
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

}  // namespace ferry
