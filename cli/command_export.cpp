// `ferry export`: a checkpoint to a Hugging Face model folder (LoRA merged or as a PEFT adapter), or
// with --format gguf to one GGUF file for llama.cpp / Ollama (LoRA merged, left out, or as a
// llama.cpp LoRA adapter). The work is io::export_hf_model (src/io/hf_export.h),
// io::export_gguf_model (src/io/gguf_export.h) and io::export_gguf_adapter
// (src/io/gguf_adapter_export.h); this file parses flags and reports.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/export_ollama.h"
#include "core/byte_size.h"
#include "core/error.h"
#include "src/io/gguf_adapter_export.h"
#include "src/io/gguf_export.h"
#include "src/io/hf_export.h"
#include "src/io/model_path.h"

namespace ferry::cli {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string output;
  std::string format = "hf";
  std::string lora;
  int64_t max_shard_size_mb = 0;
  std::string gguf_type = "f16";
  std::string gguf_name;
  std::string gguf_pre;
  std::string name;           // ollama: the model name
  std::string chat_template;  // ollama: the template to write as TEMPLATE
  bool create = false;        // ollama: run `ollama create`
};

void run_hf_export(const ExportArgs& args) {
  if (args.lora == "none") {
    throw UserError("--lora none goes with --format gguf (the base weights alone, for a llama.cpp LoRA adapter); "
                    "--format hf writes the model with the adapters merged, or the adapter alone (--lora adapter)");
  }
  constexpr int64_t kMaxShardMiB = int64_t{1} << 30;  // 1 PiB: anything above is a typo
  if (args.max_shard_size_mb < 0 || args.max_shard_size_mb > kMaxShardMiB) {
    throw UserError("--max-shard-size-mb must be 0 (one file) or a size in MiB up to " + std::to_string(kMaxShardMiB) +
                    ", got " + std::to_string(args.max_shard_size_mb));
  }
  io::HfExportOptions options;
  options.checkpoint = io::resolve_model_path(args.checkpoint);  // a GGUF file or ollama: name too
  options.output = args.output;
  options.max_shard_bytes = static_cast<uint64_t>(args.max_shard_size_mb) << 20;
  options.lora = args.lora == "adapter" ? io::LoraExport::adapter : io::LoraExport::merged;
  const io::HfExportSummary summary = io::export_hf_model(options);
  std::cout << "exported " << summary.tensors << " tensors (" << format_bytes_approx(summary.weight_bytes) << ") in "
            << summary.weight_files << (summary.weight_files == 1 ? " file" : " shards") << " to " << args.output
            << (summary.score_model ? " as a sequence-classification (reward) model" : "") << "\n";
  if (!summary.copied_files.empty()) {
    std::cout << "copied:";
    for (const auto& file : summary.copied_files) std::cout << " " << file;
    std::cout << "\n";
  }
}

void print_tensor_types(const std::map<std::string, int64_t>& types) {
  bool first = true;
  for (const auto& [type, count] : types) {
    std::cout << (first ? "" : ", ") << count << " " << type;
    first = false;
  }
}

void run_gguf_adapter_export(const ExportArgs& args) {
  if (!args.gguf_pre.empty()) {
    throw UserError("--gguf-pre has no effect with --lora adapter: a LoRA adapter holds no tokenizer (llama.cpp "
                    "takes it from the base model)");
  }
  io::GgufAdapterExportOptions options;
  options.checkpoint = args.checkpoint;
  options.output = args.output;
  options.type = io::parse_gguf_file_type(args.gguf_type);
  options.name = args.gguf_name;
  const io::GgufAdapterExportSummary summary = io::export_gguf_adapter(options);
  std::cout << "exported " << summary.tensors << " tensors (";
  print_tensor_types(summary.tensor_types);
  std::cout << ") as a GGUF " << summary.architecture << " LoRA adapter '" << summary.name << "' of "
            << summary.projections << " projections (rank " << summary.rank << ", alpha " << summary.alpha
            << ": scale " << summary.alpha / static_cast<double>(summary.rank) << ") to " << summary.file.string()
            << " (" << format_bytes_approx(summary.file_bytes) << ")\n"
            << "apply it to the run's base model in GGUF (its model.path exported with --format gguf, or this "
               "checkpoint with --format gguf --lora none): llama-cli -m base.gguf --lora "
            << summary.file.string() << "\n";
}

void run_gguf_export(const ExportArgs& args) {
  if (args.max_shard_size_mb != 0) throw UserError("--max-shard-size-mb goes with --format hf; GGUF is one file");
  if (args.lora == "adapter") {
    run_gguf_adapter_export(args);
    return;
  }
  io::GgufExportOptions options;
  options.checkpoint = io::resolve_model_path(args.checkpoint);  // a GGUF file or ollama: name too
  options.output = args.output;
  options.type = io::parse_gguf_file_type(args.gguf_type);
  options.name = args.gguf_name;
  options.pre = args.gguf_pre;
  options.merge_lora = args.lora != "none";
  const io::GgufExportSummary summary = io::export_gguf_model(options);
  for (const auto& warning : summary.warnings) std::cerr << "warning: " << warning << "\n";
  std::cout << "exported " << summary.tensors << " tensors (";
  print_tensor_types(summary.tensor_types);
  std::cout << ") as GGUF " << summary.architecture << " '" << summary.name << "'"
            << (summary.lora_merged ? " with LoRA merged" : "")
            << (summary.lora_left_out ? " without its LoRA adapters (the base weights)" : "") << " to "
            << summary.file.string() << " ("
            << format_bytes_approx(summary.file_bytes) << ")\n"
            << "tokenizer: " << summary.tokenizer << ", " << summary.vocab_size << " tokens\n";
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* command = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face model folder, or as one GGUF file for llama.cpp / Ollama");
  command->add_option("--checkpoint", args->checkpoint, "checkpoint folder (output.dir/step-N or final)")->required();
  command->add_option("--output", args->output,
                      "hf: folder to write; gguf: a file ending in .gguf, or a folder that gets model.gguf "
                      "(adapter.gguf with --lora adapter)")
      ->required();
  command->add_option("--format", args->format,
                      "hf (default): Hugging Face folder; gguf: one GGUF v3 file; ollama: a folder with the GGUF and "
                      "a Modelfile (chat template, stop parameters, the training data's system prompt)")
      ->check(CLI::IsMember({"hf", "gguf", "ollama"}));
  command->add_option("--name", args->name, "ollama: the model name for `ollama create` (default: the folder's name)");
  command->add_option("--chat-template", args->chat_template,
                      "ollama: the chat template to write as TEMPLATE (default: the run's tokenizer.chat_template, "
                      "else the model folder's own)");
  command->add_flag("--create", args->create, "ollama: run `ollama create` (needs ollama on PATH)");
  command->add_option("--lora", args->lora,
                      "a LoRA checkpoint's adapters: merged (default) into the weights; adapter: hf a PEFT adapter "
                      "folder, gguf a llama.cpp LoRA adapter file; none (gguf): the base weights alone")
      ->check(CLI::IsMember({"merged", "adapter", "none"}));
  command->add_option("--max-shard-size-mb", args->max_shard_size_mb,
                      "hf: split weights into shards of this size (0: one file)");
  command->add_option("--gguf-type", args->gguf_type,
                      "gguf: tensor type of the matrices: f16 (default), bf16, q8_0 or f32 (as llama.cpp's converter "
                      "writes them), or llama-quantize's q4_k_m, q4_k_s, q5_k_m, q6_k, q4_0, q5_0 (its per-tensor "
                      "types and blocks, e.g. q4_k_m: Q4_K with Q6_K for output and some attn_v / ffn_down); norms "
                      "and biases stay f32")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_k_m", "q4_k_s", "q5_k_m", "q6_k", "q4_0", "q5_0"}));
  command->add_option("--gguf-name", args->gguf_name, "gguf: general.name (default: the checkpoint folder's name)");
  command->add_option("--gguf-pre", args->gguf_pre,
                      "gguf: llama.cpp pre-tokenizer name for a BPE tokenizer Ferry does not recognise "
                      "(e.g. llama-bpe, qwen2, smollm, gpt-2)");
  command->callback([args, command] {
    if (args->format != "ollama") {
      for (const char* flag : {"--name", "--chat-template", "--create"}) {
        if (command->get_option(flag)->count() > 0) throw UserError(std::string(flag) + " goes with --format ollama");
      }
    }
    if (args->format == "ollama") {
      if (args->lora == "none") throw UserError("--lora none goes with --format gguf; ollama takes merged or adapter");
      if (command->get_option("--gguf-pre")->count() > 0 || args->max_shard_size_mb != 0) {
        throw UserError("--gguf-pre and --max-shard-size-mb go with --format gguf / hf");
      }
      run_ollama_export({args->checkpoint, args->output, args->lora, args->gguf_type, args->name,
                         args->chat_template, args->create});
      return;
    }
    if (args->format == "gguf") {
      run_gguf_export(*args);
      return;
    }
    for (const char* flag : {"--gguf-type", "--gguf-name", "--gguf-pre"}) {
      if (command->get_option(flag)->count() > 0) throw UserError(std::string(flag) + " goes with --format gguf");
    }
    run_hf_export(*args);
  });
}

}  // namespace ferry::cli
