// Preference pairs for reward models and DPO: a prompt with a chosen and a rejected response, each
// tokenised through the chat template as prompt + response, with the loss mask on the response's
// final assistant turn only (its content and end-of-assistant marker).
//
// Row formats (any data file, data_file.h; Alpaca and ShareGPT rows too, row_format.h):
//   ColossalChat  {"context": [messages], "chosen": [messages], "rejected": [messages]}: the
//                 response's last assistant turn is trained (its content and end-of-turn marker)
//   TRL           {"prompt"?, "chosen", "rejected"}, all message lists (conversational) or all text
//                 (standard), the prompt implicit in chosen and rejected when absent: tokenised
//                 as TRL's DPO trainer does (trl_tokenize.h), every token after the prompt trained
// An optional number "margin" per line is the reward model's required score gap.
//
// Bad pairs: an empty chosen or rejected response, chosen identical to rejected, and a prompt that
// leaves no room for a response under data.max_length. With data.skip_bad_lines they are skipped
// and counted per reason; otherwise the run stops with file:line. A pair that fits its prompt but
// not its whole response keeps the response's first tokens (counted as truncated).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/data/jsonl_reader.h"
#include "src/data/row_format.h"
#include "src/data/sft_dataset.h"
#include "src/data/trl_tokenize.h"
#include "src/tokenizer/chat_message.h"

namespace ferry {

class Tokenizer;
struct ChatTemplate;

struct PreferencePair {
  // prompt + response, loss_mask on the response's last turn; `line` (both) is the pair's source line
  TokenizedSample chosen, rejected;
  double margin = 0.0;
  // Reference-model log-probs of chosen and rejected (summed over their loss tokens), filled in
  // by DPO's `precompute` reference; empty otherwise.
  std::optional<double> reference_chosen_logps, reference_rejected_logps;
};

struct PreferenceDatasetStats {
  JsonlStats jsonl;
  int64_t pairs = 0;             // kept
  int64_t truncated = 0;         // kept, with a response cut at max_length
  int64_t empty_response = 0;    // skipped: chosen or rejected response empty
  int64_t identical = 0;         // skipped: chosen equals rejected
  int64_t no_room = 0;           // skipped: the prompt alone fills max_length
  int64_t prompt_diverged = 0;   // kept TRL rows whose prompt renders differently once answered: trained
                                 // from where the ids part, as TRL does (it warns)

  int64_t bad_pairs() const { return empty_response + identical + no_room; }
  // One line for the run log: "2000 pairs, 3 truncated; skipped: 1 empty response, 0 identical, ...".
  std::string summary() const;
};

struct PreferenceDataset {
  std::vector<PreferencePair> pairs;
  PreferenceDatasetStats stats;
};

// The field `key`: a message list, or a plain string standing for one message of `role`.
Conversation messages_or_text(const nlohmann::ordered_json& object, const std::string& key, ChatRole role);

// True for a response with no message, or whose last message is blank.
bool empty_response(const Conversation& response);

// A preference line as conversations: the prompt (ending with a user message) and the two
// responses (starting with an assistant message), with the line's tools and documents. Throws
// InputError naming the field.
struct PreferenceMessages {
  Conversation prompt, chosen, rejected;  // conversational rows (for TRL rows: after extract_prompt)
  ChatContext context;  // the line's "tools" and "documents", rendered with prompt + each response
  double margin = 0.0;
  // TRL rows (no "context"): the fields as TRL reads them; standard (text) rows leave the
  // conversations above empty.
  bool trl = false;
  TrlField trl_prompt, trl_chosen, trl_rejected;

  bool chosen_empty() const;
  bool rejected_empty() const;
  bool identical() const;
};
PreferenceMessages preference_messages_from_json(const nlohmann::ordered_json& object);

// Reads `path` (data_file.h). max_samples 0 means all. Throws InputError naming file:line for a
// malformed line or a bad pair unless skip_bad_lines.
PreferenceDataset load_preference_dataset(const std::string& path, const Tokenizer& tokenizer,
                                          const ChatTemplate& chat_template, int64_t max_length, bool skip_bad_lines,
                                          int64_t max_samples = 0, const RowFormat& format = {});

// Both sides of a pair as training sequences, each nullopt when the prompt leaves it no token
// under max_length; `*_cut` set when a side was cut. ColossalChat rows: tokenize_response; TRL
// rows: prompt + response ids with the prompt where TRL's DPO trainer puts it (the shorter common
// prefix of the prompt's ids with either side's).
struct PairSamples {
  std::optional<TokenizedSample> chosen, rejected;
  bool chosen_cut = false, rejected_cut = false;
  bool prompt_diverged = false;  // TRL rows: the prompt's ids are not a prefix of prompt + response's
};
PairSamples tokenize_pair(const PreferenceMessages& pair, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          int64_t max_length);

// prompt + response through the chat template (with the line's tools and documents), the loss mask
// kept on the final assistant turn only and the sequence cut at max_length. nullopt when the prompt
// leaves no response token under max_length. `truncated` is set when the response was cut.
std::optional<TokenizedSample> tokenize_response(const Conversation& prompt, const Conversation& response,
                                                 const ChatContext& context, const Tokenizer& tokenizer,
                                                 const ChatTemplate& chat_template, int64_t max_length,
                                                 bool* truncated = nullptr);

}  // namespace ferry
