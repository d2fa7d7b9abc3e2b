// Unpaired preference data for KTO: a prompt with one completion labelled desirable (true) or
// undesirable (false), tokenised through the chat template as prompt + completion with the loss
// mask on the completion's final assistant turn (as preference_dataset.h does for each side of a pair).
//
// Row formats (any data file, data_file.h; Alpaca and ShareGPT rows with a kto_tag too):
//   TRL unpaired   {"prompt": [messages] | "text", "completion": [messages] | "text", "label": true|false},
//                  tokenised as TRL's KTO trainer does (trl_tokenize.h): every completion token trained
//   pairs          any preference-pair line (preference_dataset.h: {"prompt"|"context", "chosen",
//                  "rejected"}), split as TRL's unpair_preference_dataset splits them: per block of
//                  up to 1000 lines, every chosen completion (label true), then every rejected one
//                  (label false), so that neighbouring examples rarely share a prompt
// A file holds one of the two; a line of the other kind is an error naming it. Lines may carry
// "tools" and "documents" as chat lines do.
//
// Bad examples: an empty completion, and a prompt that leaves no room for a completion under
// data.max_length. With data.skip_bad_lines they are skipped and counted; otherwise the run stops
// with file:line. An example that fits its prompt but not its whole completion keeps the
// completion's first tokens (counted as truncated).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/data/jsonl_reader.h"
#include "src/data/row_format.h"
#include "src/data/sft_dataset.h"

namespace ferry {

class Tokenizer;
struct ChatTemplate;

struct UnpairedExample {
  TokenizedSample sample;  // prompt + completion, loss_mask on the completion's last turn
  bool desirable = true;
};

struct UnpairedDatasetStats {
  JsonlStats jsonl;
  int64_t desirable = 0, undesirable = 0;  // kept
  int64_t from_pairs = 0;                  // kept examples that were one side of a pair line
  int64_t truncated = 0;                   // kept, with a completion cut at max_length
  int64_t empty_completion = 0;            // skipped
  int64_t no_room = 0;                     // skipped: the prompt alone fills max_length

  int64_t examples() const { return desirable + undesirable; }
  // One line for the run log: "400 examples (200 desirable, 200 undesirable; 400 from pairs), ...".
  std::string summary() const;
};

struct UnpairedDataset {
  std::vector<UnpairedExample> examples;
  UnpairedDatasetStats stats;
};

// Reads `path`. max_samples 0 means all (counted in examples). Throws InputError naming file:line
// for a malformed line or a bad example unless skip_bad_lines.
UnpairedDataset load_unpaired_dataset(const std::string& path, const Tokenizer& tokenizer,
                                      const ChatTemplate& chat_template, int64_t max_length, bool skip_bad_lines,
                                      int64_t max_samples = 0, const RowFormat& format = {});

}  // namespace ferry
