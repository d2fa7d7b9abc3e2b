// `ferry config import`: another fine-tuning tool's YAML config as a Ferry config.
//
//   TRL           the YAML `trl sft|dpo|grpo|reward|kto --config FILE` reads: the keys of its
//                 ScriptArguments, SFTConfig/DPOConfig/GRPOConfig/RewardConfig/KTOConfig (with
//                 transformers' TrainingArguments), ModelConfig and DatasetMixtureConfig
//   Axolotl       `axolotl train FILE`: base_model, datasets, sequence_len, adapter, lora_r, rl, trl: ...
//   LLaMA-Factory `llamafactory-cli train FILE`: model_name_or_path, stage, finetuning_type,
//                 cutoff_len, pref_beta, ...
//
// The result trains as the other tool would: its defaults are written where Ferry's differ and
// change what is trained, units are converted where the meanings differ (GRPO's max_steps: TRL's
// optimizer steps, Ferry's rollouts), and each conversion says so in a comment line. Keys with no
// Ferry equivalent are listed with the reason. docs/from-trl.md is the table behind it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/config/config_enum.h"

namespace ferry {

enum class ForeignTool { trl, axolotl, llamafactory };

struct UnmappedKey {
  std::string key;     // as the other tool names it: "lora_target_parameters", "trl.use_vllm"
  std::string reason;  // why Ferry does not take it, and what to do instead
};

struct ImportedConfig {
  Stage stage = Stage::any;
  std::string yaml;  // the Ferry config: a header comment, then the keys (comments on conversions)
  std::vector<UnmappedKey> unmapped;
};

// "trl", "axolotl" or "llamafactory" (also "llama-factory", "llama_factory"); `file` is the config
// being imported, named in the ConfigError for any other name.
ForeignTool foreign_tool_from_name(std::string_view name, const std::string& file);
std::string_view foreign_tool_name(ForeignTool tool);  // "TRL", "Axolotl", "LLaMA-Factory"

// Converts `text` (the YAML of `file`). `stage`: Stage::any to take it from the file (LLaMA-Factory's
// `stage:`, Axolotl's `rl:` / `reward_model:`); without either, a ConfigError asks for --stage.
// The result is checked to load as a Ferry config. Throws ConfigError naming `file`: not a mapping,
// a value of the wrong type, a stage the tool or Ferry lacks, values Ferry's checks refuse.
ImportedConfig import_foreign_config(ForeignTool tool, const std::string& text, const std::string& file,
                                     Stage stage = Stage::any);

// The same for a file on disk (a ConfigError naming it when it cannot be read).
ImportedConfig import_foreign_config_file(ForeignTool tool, const std::string& path, Stage stage = Stage::any);

}  // namespace ferry
