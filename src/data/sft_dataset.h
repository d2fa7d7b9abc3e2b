// The SFT dataset, from any data file (data_file.h) and row format (row_format.h):
//   {"messages": [...]}        (Ferry, ColossalChat, TRL conversational language modelling; Alpaca
//                              and ShareGPT rows become these) through the chat template into ids
//                              and a loss mask (1 on assistant content through the end-of-assistant
//                              marker), truncated to data.max_length by dropping whole trailing
//                              rounds, never by cutting a round in half;
//   {"text": "..."}            TRL language modelling: tokenizer(text + EOS), every token trained;
//   {"prompt", "completion"}   TRL prompt-completion, text or messages, tokenised as TRL's
//                              SFTTrainer does (trl_tokenize.h) with completion_only_loss: the
//                              loss on the completion only.
// TRL rows longer than data.max_length are cut there (TRL's truncation), as one round.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/data/epoch_order.h"  // split_off_eval
#include "src/data/jsonl_reader.h"
#include "src/data/row_format.h"

namespace ferry {

class Tokenizer;
struct ChatTemplate;

struct TokenizedSample {
  std::vector<int64_t> ids;
  std::vector<uint8_t> loss_mask;  // same length as ids
  int64_t line = 0;                // source line, for messages
};

struct SftDatasetStats {
  JsonlStats jsonl;
  int64_t samples = 0;            // kept
  int64_t truncated = 0;          // kept, with trailing rounds dropped
  int64_t rounds_dropped = 0;     // rounds removed by truncation
  int64_t dropped_too_long = 0;   // first round alone longer than max_length
  int64_t tokens = 0;             // ids in kept samples
  int64_t loss_tokens = 0;        // of which the loss is taken on

  // One line for the run log: "4000 samples, 0 truncated (0 rounds), 0 too long, 3 bad lines skipped".
  std::string summary() const;
};

struct SftDataset {
  std::vector<TokenizedSample> samples;
  SftDatasetStats stats;
};

// Reads `path` (see above). max_samples 0 means all. Throws InputError naming file:line for a
// malformed line unless skip_bad_lines.
SftDataset load_sft_dataset(const std::string& path, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                            int64_t max_length, bool skip_bad_lines, int64_t max_samples = 0,
                            const RowFormat& format = {});

}  // namespace ferry
