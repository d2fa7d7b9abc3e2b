// Loading and tokenising unpaired preference examples (see unpaired_dataset.h).
#include "src/data/unpaired_dataset.h"

#include <nlohmann/json.hpp>

#include <optional>

#include "core/error.h"
#include "core/text.h"
#include "src/data/conversation_json.h"
#include "src/data/data_file.h"
#include "src/data/trl_tokenize.h"
#include "src/data/preference_dataset.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {

std::string UnpairedDatasetStats::summary() const {
  std::string s = std::to_string(examples()) + " examples (" + std::to_string(desirable) + " desirable, " +
                  std::to_string(undesirable) + " undesirable";
  if (from_pairs > 0) s += "; " + std::to_string(from_pairs) + " split from preference pairs";
  s += "), " + std::to_string(truncated) + " with a truncated completion; bad examples skipped: " +
       std::to_string(empty_completion) + " empty completion, " + std::to_string(no_room) +
       " prompt leaving no room under data.max_length";
  if (jsonl.skipped > 0) {
    s += "; " + std::to_string(jsonl.skipped) + " malformed lines skipped (first: " + jsonl.first_skipped_error + ")";
  }
  return s;
}

namespace {

constexpr size_t kUnpairBlock = 1000;  // TRL's unpair_preference_dataset: datasets.map's batch size

bool is_pair_line(const nlohmann::ordered_json& object) {
  return object.contains("chosen") || object.contains("rejected");
}

}  // namespace

UnpairedDataset load_unpaired_dataset(const std::string& path, const Tokenizer& tokenizer,
                                      const ChatTemplate& chat_template, int64_t max_length, bool skip_bad_lines,
                                      int64_t max_samples, const RowFormat& format) {
  UnpairedDataset dataset;
  auto& stats = dataset.stats;
  std::optional<bool> pairs_file;  // decided by the first line
  // A pair line's two sides, held until its block of lines is complete.
  std::vector<UnpairedExample> block_chosen, block_rejected;
  auto full = [&] { return max_samples > 0 && stats.examples() >= max_samples; };
  auto keep = [&](UnpairedExample example, bool from_pair) {
    if (full()) return;
    ++(example.desirable ? stats.desirable : stats.undesirable);
    if (from_pair) ++stats.from_pairs;
    dataset.examples.push_back(std::move(example));
  };
  auto flush_block = [&] {
    for (auto* side : {&block_chosen, &block_rejected}) {
      for (auto& example : *side) keep(std::move(example), true);
      side->clear();
    }
  };
  size_t block_lines = 0;
  // A bad example is counted under its reason when skipped, or stops the run (the reader adds file:line).
  auto bad = [&](int64_t& counter, const std::string& what) {
    if (!skip_bad_lines) throw InputError(what + " (fix or remove the line, or set data.skip_bad_lines: true)");
    ++counter;
  };
  // A tokenised side, or nullopt (counted) when it cannot be trained on.
  auto usable = [&](std::optional<TokenizedSample> sample, bool empty, bool cut, int64_t line,
                    const char* side) -> std::optional<TokenizedSample> {
    if (empty) {
      bad(stats.empty_completion, std::string("bad example: the ") + side + " is empty");
      return std::nullopt;
    }
    if (!sample) {
      bad(stats.no_room, "bad example: the prompt alone fills data.max_length (" + std::to_string(max_length) +
                             " tokens), leaving no room for a completion; raise data.max_length");
      return std::nullopt;
    }
    if (cut) ++stats.truncated;
    sample->line = line;
    return sample;
  };

  int64_t pair_lines = 0;  // max_samples counts examples: a pair line holds two
  const DataFile file = DataFile::open(path);
  stats.jsonl = file.for_each(skip_bad_lines, [&](int64_t line, uint64_t, const nlohmann::ordered_json& row) {
    if (full() || (max_samples > 0 && 2 * pair_lines >= max_samples)) return;
    const nlohmann::ordered_json object = normalize_row(row, format);
    const bool pair = is_pair_line(object);
    if (!pairs_file) pairs_file = pair;
    if (pair != *pairs_file) {
      throw InputError(std::string("this line is ") + (pair ? "a preference pair" : "an unpaired example") +
                       " but the file's first line was " + (pair ? "an unpaired example" : "a preference pair") +
                       "; keep one kind per file (unpaired: {\"prompt\", \"completion\", \"label\"})");
    }
    if (pair) {
      ++pair_lines;
      const PreferenceMessages messages = preference_messages_from_json(object);
      PairSamples samples = messages.chosen_empty() || messages.rejected_empty()
                                ? PairSamples{}
                                : tokenize_pair(messages, tokenizer, chat_template, max_length);
      auto chosen = usable(std::move(samples.chosen), messages.chosen_empty(), samples.chosen_cut, line,
                           "chosen response");
      auto rejected = usable(std::move(samples.rejected), messages.rejected_empty(), samples.rejected_cut, line,
                             "rejected response");
      if (chosen) block_chosen.push_back({std::move(*chosen), true});
      if (rejected) block_rejected.push_back({std::move(*rejected), false});
      if (++block_lines == kUnpairBlock) {
        flush_block();
        block_lines = 0;
      }
      return;
    }
    if (!object.contains("prompt") || !object.contains("completion") || !object.contains("label")) {
      throw InputError("an unpaired example needs \"prompt\", \"completion\" and \"label\" (true for a desirable "
                       "completion, false for an undesirable one), or a preference pair's \"chosen\" and \"rejected\"");
    }
    const auto& label = object.at("label");
    if (!label.is_boolean()) throw InputError("field \"label\" must be true or false, got " + label.dump());
    // As TRL's KTO trainer: prompt + completion, the completion from where their ids part.
    const bool conversational = is_conversational_row(object);
    const TrlField prompt = trl_field(object, "prompt", conversational);
    TrlField completion = trl_field(object, "completion", conversational);
    const bool empty = conversational ? empty_response(completion.messages) : trim(completion.text).empty();
    std::optional<TokenizedSample> sample;
    bool cut = false;
    if (!empty) {
      if (!conversational) completion.text = with_eos_text(completion.text, tokenizer);
      const ChatContext context = chat_context_from_json(object);
      const std::vector<int64_t> prompt_ids = trl_prompt_ids(prompt, context, tokenizer, chat_template);
      std::vector<int64_t> ids = trl_sequence_ids(prompt, completion, context, tokenizer, chat_template);
      const size_t prompt_length = common_prefix_length(prompt_ids, ids);
      sample = trl_completion_sample(std::move(ids), prompt_length, max_length, line, &cut);
    }
    if (auto kept = usable(std::move(sample), empty, cut, line, "completion")) {
      keep({std::move(*kept), label.get<bool>()}, false);
    }
  });
  flush_block();
  return dataset;
}

}  // namespace ferry
