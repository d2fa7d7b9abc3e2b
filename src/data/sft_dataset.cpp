// Loading, truncation and eval split of SFT conversations.
#include "src/data/sft_dataset.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "src/data/conversation_json.h"
#include "src/data/data_file.h"
#include "src/data/trl_tokenize.h"
#include "src/tokenizer/tokenizer.h"
#include "src/tokenizer/chat_template.h"

namespace ferry {

std::string SftDatasetStats::summary() const {
  std::string s = std::to_string(samples) + " samples (" + std::to_string(tokens) + " tokens, " +
                  std::to_string(loss_tokens) + " with loss), " + std::to_string(truncated) + " truncated (" +
                  std::to_string(rounds_dropped) + " rounds dropped), " + std::to_string(dropped_too_long) +
                  " dropped as too long";
  if (jsonl.skipped > 0) {
    s += ", " + std::to_string(jsonl.skipped) + " bad lines skipped (first: " + jsonl.first_skipped_error + ")";
  }
  return s;
}

namespace {

// A TRL text or prompt-completion row as TRL's SFTTrainer tokenises it, cut at max_length; nullopt
// when the prompt fills max_length.
std::optional<TokenizedSample> tokenize_trl_sft_row(const nlohmann::ordered_json& row, const Tokenizer& tokenizer,
                                                    const ChatTemplate& chat_template, int64_t max_length,
                                                    int64_t line, bool* truncated) {
  if (!row.contains("prompt")) {  // language modelling: {"text": "..."}
    const auto text = row.find("text");
    if (!text->is_string()) throw InputError("field \"text\" must be a string (use \"messages\" for a conversation)");
    return trl_completion_sample(tokenizer.encode_as_sequence(with_eos_text(text->get<std::string>(), tokenizer)), 0,
                                 max_length, line, truncated);
  }
  const bool conversational = is_conversational_row(row);
  const TrlField prompt = trl_field(row, "prompt", conversational);
  TrlField completion = trl_field(row, "completion", conversational);
  if (!conversational) completion.text = with_eos_text(completion.text, tokenizer);
  const ChatContext context = chat_context_from_json(row);
  const std::vector<int64_t> prompt_ids = trl_prompt_ids(prompt, context, tokenizer, chat_template);
  std::vector<int64_t> ids = trl_sequence_ids(prompt, completion, context, tokenizer, chat_template);
  const size_t prompt_length = common_prefix_length(prompt_ids, ids);
  return trl_completion_sample(std::move(ids), prompt_length, max_length, line, truncated);
}

}  // namespace

SftDataset load_sft_dataset(const std::string& path, const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                            int64_t max_length, bool skip_bad_lines, int64_t max_samples, const RowFormat& format) {
  SftDataset dataset;
  auto& stats = dataset.stats;
  const DataFile file = DataFile::open(path);
  stats.jsonl = file.for_each(skip_bad_lines, [&](int64_t line, uint64_t, const nlohmann::ordered_json& row) {
    if (max_samples > 0 && static_cast<int64_t>(dataset.samples.size()) >= max_samples) return;
    const nlohmann::ordered_json object = normalize_row(row, format);
    if (!object.contains("messages")) {
      if (!object.contains("text") && !(object.contains("prompt") && object.contains("completion"))) {
        throw InputError("an SFT row needs \"messages\" (a conversation), \"text\", or \"prompt\" with "
                         "\"completion\"; Alpaca (instruction/output) and ShareGPT (conversations) rows work too, "
                         "and data.columns maps other column names (docs/data.md)");
      }
      bool cut = false;
      auto sample = tokenize_trl_sft_row(object, tokenizer, chat_template, max_length, line, &cut);
      if (!sample) {
        ++stats.dropped_too_long;
        return;
      }
      if (cut) ++stats.truncated;
      stats.tokens += static_cast<int64_t>(sample->ids.size());
      stats.loss_tokens += std::count(sample->loss_mask.begin(), sample->loss_mask.end(), uint8_t{1});
      dataset.samples.push_back(std::move(*sample));
      return;
    }
    const Conversation conversation = conversation_from_json(object, "messages");
    TokenizedConversation tokenized = chat_template.apply(conversation, tokenizer, chat_context_from_json(object));
    // Keep the most whole rounds that fit.
    size_t rounds = 0;
    while (rounds < tokenized.round_ends.size() &&
           static_cast<int64_t>(tokenized.round_ends[rounds]) <= max_length) {
      ++rounds;
    }
    if (rounds == 0) {
      ++stats.dropped_too_long;
      return;
    }
    if (rounds < tokenized.round_ends.size()) {
      ++stats.truncated;
      stats.rounds_dropped += static_cast<int64_t>(tokenized.round_ends.size() - rounds);
      tokenized = tokenized.first_rounds(rounds);
    }
    TokenizedSample sample{std::move(tokenized.ids), std::move(tokenized.loss_mask), line};
    stats.tokens += static_cast<int64_t>(sample.ids.size());
    stats.loss_tokens += std::count(sample.loss_mask.begin(), sample.loss_mask.end(), uint8_t{1});
    dataset.samples.push_back(std::move(sample));
  });
  stats.samples = static_cast<int64_t>(dataset.samples.size());
  return dataset;
}

}  // namespace ferry
