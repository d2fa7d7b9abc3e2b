// The dataset formats users bring, read into the keys Ferry's loaders take (docs/data.md):
//   Ferry / ColossalChat  {"messages": [...]}, {"context", "chosen", "rejected"}, ...: unchanged
//   TRL                   text, prompt, completion, chosen, rejected, label (standard: strings;
//                         conversational: message lists): unchanged, the loaders tokenise them as
//                         TRL does (trl_tokenize.h)
//   Alpaca                {"instruction", "input"?, "output", "system"?, "history"?: [[q, a], ...]}
//                         (and chosen/rejected strings, or a boolean kto_tag), as LLaMA-Factory's
//                         AlpacaDatasetConverter reads them: the user turn is instruction and input
//                         joined by a newline
//   ShareGPT              {"conversations": [{"from": "human"|"gpt"|"system"|"function_call"|
//                         "observation", "value": ...}], "system"?, "tools"?} (and chosen/rejected
//                         turns, or a kto_tag), as LLaMA-Factory's SharegptDatasetConverter reads
//                         them: function_call turns become assistant tool calls, observation turns
//                         tool messages
// Alpaca and ShareGPT rows become Ferry messages (SFT), TRL conversational prompt/chosen/rejected
// (preference), prompt/completion/label (unpaired, with a kto_tag) or prompt (no answer).
//
// data.columns renames the file's columns to the keys above first ({prompt: question}); data.tags
// renames ShareGPT's tags (role_tag, content_tag, user_tag, assistant_tag, observation_tag,
// function_tag, system_tag), as LLaMA-Factory's dataset_info does.
#pragma once

#include <map>
#include <vector>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "core/config/config_enum.h"

namespace ferry {

struct DataConfig;

struct ShareGptTags {
  std::string role = "from", content = "value", user = "human", assistant = "gpt", observation = "observation",
              function = "function_call", system = "system";
};

struct RowFormat {
  DataFormat format = DataFormat::auto_;
  std::map<std::string, std::string> columns;  // Ferry key -> the file's column
  ShareGptTags tags;

  // From data.format, data.columns and data.tags. ConfigError naming the key (with the closest
  // valid name) for an unknown field or tag, or a value that is not a string.
  static RowFormat from_config(const DataConfig& data);
  bool is_default() const { return format == DataFormat::auto_ && columns.empty(); }
};

// The keys data.columns may name (docs/data.md).
const std::vector<std::string>& row_field_names();

// `row` with its columns renamed and an Alpaca or ShareGPT row converted (see above); other rows
// come back as they are. InputError naming the field for a malformed Alpaca or ShareGPT row.
nlohmann::ordered_json normalize_row(const nlohmann::ordered_json& row, const RowFormat& format);

}  // namespace ferry
