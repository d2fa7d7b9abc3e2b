// `ferry export`: a checkpoint to a Hugging Face model folder (LoRA merged or as a PEFT adapter).
// The work is io::export_hf_model (src/io/hf_export.h); this file parses flags and reports.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "src/cli/commands.h"
#include "src/core/byte_size.h"
#include "src/core/error.h"
#include "src/io/hf_export.h"

namespace ferry::cli {
namespace {

struct ExportArgs {
  std::string checkpoint;
  std::string output;
  std::string lora;
  int64_t max_shard_size_mb = 0;
};

void run_export(const ExportArgs& args) {
  constexpr int64_t kMaxShardMiB = int64_t{1} << 30;  // 1 PiB: anything above is a typo
  if (args.max_shard_size_mb < 0 || args.max_shard_size_mb > kMaxShardMiB) {
    throw UserError("--max-shard-size-mb must be 0 (one file) or a size in MiB up to " + std::to_string(kMaxShardMiB) +
                    ", got " + std::to_string(args.max_shard_size_mb));
  }
  io::HfExportOptions options;
  options.checkpoint = args.checkpoint;
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

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  auto* command = app.add_subcommand("export", "Write a checkpoint as a Hugging Face model folder");
  command->add_option("--checkpoint", args->checkpoint, "checkpoint folder (output.dir/step-N or final)")->required();
  command->add_option("--output", args->output, "folder to write")->required();
  command->add_option("--lora", args->lora, "merged (default) or adapter (PEFT format)")
      ->check(CLI::IsMember({"merged", "adapter"}));
  command->add_option("--max-shard-size-mb", args->max_shard_size_mb, "split weights into shards of this size (0: one file)");
  command->callback([args] { run_export(*args); });
}

}  // namespace ferry::cli
